// Command verify-cosigned checks a cosigned checkpoint with the Go ecosystem's own note libraries
// (golang.org/x/mod/sumdb/note and transparency-dev/formats), independently of blackbox's Python.
//
// Usage: verify-cosigned NOTE_FILE LOG_VKEY WITNESS_VKEY...
// Prints "ok <origin> <size> <n> witnesses" and exits 0 when the log's signature and every
// witness's cosignature/v1 verify; exits 1 naming the failure otherwise.
package main

import (
	"fmt"
	"os"

	f_log "github.com/transparency-dev/formats/log"
	f_note "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: verify-cosigned NOTE_FILE LOG_VKEY WITNESS_VKEY...")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("read note: %v", err)
	}
	logV, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fail("log vkey: %v", err)
	}
	verifiers := []note.Verifier{logV}
	for _, vkey := range os.Args[3:] {
		v, err := f_note.NewVerifierForCosignatureV1(vkey)
		if err != nil {
			fail("witness vkey %q: %v", vkey, err)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(raw, note.VerifierList(verifiers...))
	if err != nil {
		fail("open note: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range n.Sigs {
		seen[s.Name] = true
	}
	for _, v := range verifiers {
		if !seen[v.Name()] {
			fail("no verified signature by %s", v.Name())
		}
	}
	cp := &f_log.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		fail("checkpoint: %v", err)
	}
	fmt.Printf("ok %s %d %d witnesses\n", cp.Origin, cp.Size, len(verifiers)-1)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "NOT VERIFIED: "+format+"\n", args...)
	os.Exit(1)
}
