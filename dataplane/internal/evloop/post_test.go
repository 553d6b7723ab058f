//go:build linux

package evloop

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPostAcceptedRuns: a task Post accepts runs, exactly once, even when
// the loop stops meanwhile (it runs as the loop ends); once the loop has
// ended Post refuses (false) and the task never runs, so that a goroutine
// reporting back to a loop (an offloaded decision) knows to clean up
// itself. Posters race the stop.
func TestPostAcceptedRuns(t *testing.T) {
	for round := 0; round < 50; round++ {
		l, err := New(0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- l.Run() }()
		var accepted, ran atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Go(func() {
				for i := 0; i < 200; i++ {
					if l.Post(func() { ran.Add(1) }) {
						accepted.Add(1)
					}
				}
			})
		}
		l.Stop()
		wg.Wait()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if a, r := accepted.Load(), ran.Load(); a != r {
			t.Fatalf("round %d: Post accepted %d tasks, %d ran", round, a, r)
		}
		if l.Post(func() { t.Error("ran on an ended loop") }) {
			t.Fatal("Post on an ended loop reported the task accepted")
		}
	}
}
