// Package launcher decides where the daemons of a DVM run and starts them.
//
// It has two halves. The pure half turns what the user typed into a node
// list: `--nodes K --slots S` (virtual nodes on this host), `--host h1:4,h2:8`
// and Open MPI style hostfiles. The process half starts one daemon per node
// for the master, through a Starter:
//
//	local  forks `dynrun daemon ...` on this host for each virtual node
//	       (lib/proc: own process group, dies with the master);
//	ssh    runs `ssh -o BatchMode=yes <host> dynrun daemon --join ...`, with
//	       the DVM token written to ssh's stdin so it never shows in ps;
//	join   starts nothing: daemons started by hand join the master.
//
// The package does not know the master: the master (or whoever wires it)
// asks for a Starter by name with New and calls Start once per node.
//
// # Host lists
//
// A host with no slot count gets Options.DefaultSlots (1 when zero), like
// `mpirun --host h`. A host named more than once has its slots summed, in
// the order of its first appearance, which is what Open MPI does with
// repeated hostfile lines and `--host h,h`. Host names are DNS names or IPv4
// addresses: letters, digits, '.', '-' and '_', not starting with '-'.
//
// Hostfile lines, one host each, '#' starts a comment:
//
//	node1 slots=8      # Open MPI form
//	node2:4            # --host form
//	node3              # DefaultSlots
//
// Errors name the file and line (`hosts:3: ...`) and carry wire.ErrInvalid.
package launcher
