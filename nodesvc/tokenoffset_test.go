package nodesvc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fencesim/fencesim/filedisk"
	"github.com/fencesim/fencesim/lockapi"
	"github.com/fencesim/fencesim/nodesvc"
	"github.com/fencesim/fencesim/nodesvc/nodesvctest"
	"github.com/fencesim/fencesim/process"
)

// TestTokenOffsetAcrossRestart: a group whose tokens start just below 2^63
// grants tokens that cross it, keeps growing them after every node
// restarts on its data directory, and a node restarted with another
// offset is refused (ErrTokenOffset) instead of issuing tokens that would
// break the fence.
func TestTokenOffsetAcrossRestart(t *testing.T) {
	const offset = 1<<63 - 6
	c := nodesvctest.New(t, offset)
	base := c.Peers[c.Leader()].HTTP
	var last lockapi.Token
	for i := range 6 { // each cycle is two entries: the tokens pass 2^63
		l := post(t, base, "r", "acquire", fmt.Sprintf(`{"client":"alice","ttl_ms":5000,"request_id":"q%d"}`, i), 200)
		if uint64(l.Token) <= offset || l.Token <= last {
			t.Fatalf("cycle %d: token %s, want above the offset %d and the last token %s", i, l.Token, uint64(offset), last)
		}
		last = l.Token
		post(t, base, "r", "release", `{"client":"alice","token":"`+l.Token.String()+`"}`, 200)
	}
	if last < 1<<63 {
		t.Fatalf("the last token %s did not cross 2^63", last)
	}
	for i := range c.Nodes {
		c.Stop(i)
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	base = c.Peers[c.Leader()].HTTP
	if l := post(t, base, "r", "acquire", `{"client":"bob","ttl_ms":5000,"request_id":"q1"}`, 200); l.Token <= last {
		t.Fatalf("after the restart: token %s, want above %s", l.Token, last)
	}

	c.Stop(0)
	_, err := nodesvc.Open(nodesvc.Config{ID: 0, DataDir: c.Dirs[0], Listen: "127.0.0.1:0", Peers: c.Peers, TokenOffset: 0})
	if !errors.Is(err, nodesvc.ErrTokenOffset) {
		t.Fatalf("restart with offset 0 on a directory made with %d: %v, want ErrTokenOffset", uint64(offset), err)
	}
}

// TestTokenOffsetOnlyForNewData: an offset cannot be given to a data
// directory that already holds a log made without one, nor can one past
// MaxTokenOffset be given at all.
func TestTokenOffsetOnlyForNewData(t *testing.T) {
	dir := t.TempDir()
	d, err := filedisk.Open(dir, filedisk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Write("raft/hardstate", []byte{1}) // a log from before offsets
	d.Sync()
	d.Close()
	peers := []nodesvc.Peer{{ID: 0, Raft: "127.0.0.1:1", HTTP: "http://127.0.0.1:2"}, {ID: 1, Raft: "127.0.0.1:3"}, {ID: 2, Raft: "127.0.0.1:4"}}
	for _, off := range []uint64{7, nodesvc.MaxTokenOffset + 1} {
		_, err := nodesvc.Open(nodesvc.Config{ID: process.NodeID(0), DataDir: dir, Listen: "127.0.0.1:0", Peers: peers, TokenOffset: off})
		if !errors.Is(err, nodesvc.ErrTokenOffset) {
			t.Errorf("offset %d on an existing log: %v, want ErrTokenOffset", off, err)
		}
	}
}
