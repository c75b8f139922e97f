// Command dynrun: see Main.
package main

import "github.com/dynrt/dynrt/lib/cliutil"

func main() { cliutil.RunMain(Main) }
