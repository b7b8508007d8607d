// Command otherbuild is a JavaScript and Jsonnet worker executable of a build
// before the script worker protocol had a version: it loads any function and
// answers every call with an empty object, as {"ok":true} without a protocol.
// TestAWorkerExecutableOfAnotherBuildIsRefused starts it in the sandbox.
package main

import (
	"bufio"
	"os"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	for {
		if _, err := in.ReadBytes('\n'); err != nil {
			return
		}
		if _, err := os.Stdout.WriteString(`{"ok":true,"response":{}}` + "\n"); err != nil {
			return
		}
	}
}
