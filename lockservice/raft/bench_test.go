package raft

import (
	"math/rand/v2"
	"testing"
)

// benchChunk is how many Steps run between two Ready/Advance cycles, which
// run with the timer stopped so that only Step is measured.
const benchChunk = 256

func benchConfig(id ID) Config {
	return Config{ID: id, Peers: []ID{1, 2, 3}, ElectionTick: 10, HeartbeatTick: 1,
		Rand: rand.New(rand.NewPCG(1, uint64(id))), PreVote: true, CheckQuorum: true}
}

func drain(n *Node) {
	for n.HasReady() {
		n.Ready()
		n.Advance()
	}
}

// BenchmarkStep measures Step on the two hot paths of replication: a leader
// handling the MsgAppResp for one entry (update progress, commit, send the
// next append) and a follower handling a MsgApp of one entry (consistency
// check, append, commit, ack).
func BenchmarkStep(b *testing.B) {
	data := make([]byte, 64)

	b.Run("leader-MsgAppResp", func(b *testing.B) {
		n, err := New(benchConfig(1))
		if err != nil {
			b.Fatal(err)
		}
		n.becomeCandidate()
		n.becomeLeader()
		drain(n)
		term := n.Term()
		for _, p := range []ID{2, 3} {
			if err := n.Step(Message{Type: MsgAppResp, From: p, To: 1, Term: term, Index: n.log.lastIndex()}); err != nil {
				b.Fatal(err)
			}
		}
		drain(n)
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; {
			b.StopTimer()
			k := min(benchChunk, b.N-done)
			first := n.log.lastIndex() + 1
			for range k {
				if _, _, err := n.Propose(data); err != nil {
					b.Fatal(err)
				}
			}
			drain(n) // persist: the leader's own copy counts
			b.StartTimer()
			for j := range uint64(k) {
				if err := n.Step(Message{Type: MsgAppResp, From: 2, To: 1, Term: term, Index: first + j}); err != nil {
					b.Fatal(err)
				}
			}
			done += k
		}
		b.StopTimer()
		if got, want := n.Status().Commit, n.log.lastIndex(); got != want {
			b.Fatalf("commit %d, want %d", got, want)
		}
	})

	b.Run("follower-MsgApp", func(b *testing.B) {
		n, err := New(benchConfig(2))
		if err != nil {
			b.Fatal(err)
		}
		const term = 1
		if err := n.Step(Message{Type: MsgHeartbeat, From: 1, To: 2, Term: term}); err != nil {
			b.Fatal(err)
		}
		drain(n)
		msgs := make([]Message, benchChunk)
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; {
			b.StopTimer()
			drain(n)
			k := min(benchChunk, b.N-done)
			last := n.log.lastIndex()
			for j := range k {
				idx := last + uint64(j)
				var logTerm uint64
				if idx > 0 {
					logTerm = term
				}
				msgs[j] = Message{Type: MsgApp, From: 1, To: 2, Term: term, Index: idx, LogTerm: logTerm,
					Entries: []Entry{{Term: term, Index: idx + 1, Data: data}}, Commit: idx}
			}
			b.StartTimer()
			for j := range k {
				if err := n.Step(msgs[j]); err != nil {
					b.Fatal(err)
				}
			}
			done += k
		}
		b.StopTimer()
		if got := n.log.lastIndex(); got != uint64(b.N) {
			b.Fatalf("last index %d, want %d", got, b.N)
		}
	})
}
