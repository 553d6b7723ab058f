//go:build linux

package evloop

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestYieldRunsGoroutines: goroutines a loop's task starts before Yield
// report back (Post) while the loop pauses, which then runs what they
// posted without being woken for it; posts racing the pauses all run, and
// a Stop posted during a pause ends the loop.
func TestYieldRunsGoroutines(t *testing.T) {
	l, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run() }()
	const rounds = 2000
	var ran atomic.Int64
	var spawn func(n int)
	spawn = func(n int) {
		if n == rounds {
			return
		}
		go func() {
			if !l.Post(func() { ran.Add(1); spawn(n + 1) }) {
				t.Error("Post refused on a running loop")
			}
		}()
		l.Yield()
	}
	var others atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l.Post(func() {}) {
				others.Add(1)
			}
		}
	})
	l.Post(func() { spawn(0) })
	deadline := time.Now().Add(10 * time.Second)
	for ran.Load() < rounds {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reports ran", ran.Load(), rounds)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// A Stop posted while the loop pauses.
	l.Post(func() {
		go l.Stop()
		l.Yield()
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not stop")
	}
}
