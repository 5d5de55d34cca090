// Command hello prints "hello" (a target for the testproc build test).
package main

import "fmt"

func main() { fmt.Println("hello") }
