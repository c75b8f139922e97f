// Command hello prints one `WORD {json}` line; the tests of dvmtest build
// and launch it.
package main

import "fmt"

func main() { fmt.Println(`HELLO {"n":1,"s":"x"}`) }
