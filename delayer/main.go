// nfqdelay holds packets that netfilter hands to an NFQUEUE queue for a
// fixed delay plus optional jitter, then accepts them.
//
// The kernel on some hosts has no sch_netem; this is the user-space
// stand-in for netem's delay. It is order-preserving by default (a packet
// is never released before one queued earlier), like a FIFO link; -reorder
// lets jitter reorder packets, as netem does. The iptables rule that feeds
// it must not use --queue-bypass: if this process dies, traffic stops
// visibly instead of flowing undelayed.
package main

import (
	"container/heap"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
)

type heldPacket struct {
	id  uint32
	due time.Time
	seq uint64 // tie-breaker: equal due times leave in arrival order
}

type packetHeap []heldPacket

func (h packetHeap) Len() int { return len(h) }
func (h packetHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h packetHeap) Swap(i, j int)       { h[i], h[j] = h[j], h[i] }
func (h *packetHeap) Push(x interface{}) { *h = append(*h, x.(heldPacket)) }
func (h *packetHeap) Pop() interface{} {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}

// delayLine decides when each packet leaves and releases it then.
type delayLine struct {
	delay, jitter time.Duration
	normal        bool
	reorder       bool
	rng           *rand.Rand

	mu       sync.Mutex
	held     packetHeap
	lastDue  time.Time
	seq      uint64
	wake     chan struct{}
	accepted uint64
}

func (d *delayLine) sample() time.Duration {
	if d.jitter == 0 {
		return d.delay
	}
	var offset float64
	if d.normal {
		offset = d.rng.NormFloat64() * float64(d.jitter)
	} else {
		offset = (d.rng.Float64()*2 - 1) * float64(d.jitter)
	}
	v := time.Duration(float64(d.delay) + offset)
	if v < 0 {
		return 0
	}
	return v
}

func (d *delayLine) admit(id uint32, arrived time.Time) {
	d.mu.Lock()
	due := arrived.Add(d.sample())
	if !d.reorder && due.Before(d.lastDue) {
		due = d.lastDue
	}
	d.lastDue = due
	d.seq++
	heap.Push(&d.held, heldPacket{id: id, due: due, seq: d.seq})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// release runs on its own OS thread so the Go scheduler does not add
// latency to verdicts.
func (d *delayLine) release(ctx context.Context, nf *nfqueue.Nfqueue) {
	runtime.LockOSThread()
	timer := time.NewTimer(time.Hour)
	for {
		d.mu.Lock()
		if d.held.Len() == 0 {
			d.mu.Unlock()
			select {
			case <-d.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		next := d.held[0]
		wait := time.Until(next.due)
		if wait > 0 {
			d.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-d.wake:
				if !timer.Stop() {
					<-timer.C
				}
			case <-ctx.Done():
				return
			}
			continue
		}
		heap.Pop(&d.held)
		d.accepted++
		d.mu.Unlock()
		if err := nf.SetVerdict(next.id, nfqueue.NfAccept); err != nil {
			fmt.Fprintf(os.Stderr, "nfqdelay: verdict for packet %d: %v\n", next.id, err)
		}
	}
}

func main() {
	queue := flag.Uint("queue", 0, "NFQUEUE queue number to serve")
	delay := flag.Duration("delay", 0, "delay added to every packet, e.g. 20ms")
	jitter := flag.Duration("jitter", 0, "jitter around the delay")
	dist := flag.String("dist", "uniform", "jitter distribution: uniform (+-jitter) or normal (jitter = standard deviation)")
	reorder := flag.Bool("reorder", false, "let jitter reorder packets (netem's behaviour); default keeps FIFO order")
	seed := flag.Int64("seed", 0, "random seed for jitter (0: from the clock)")
	statsPath := flag.String("stats", "", "file to which a JSON line of counters is written every second")
	flag.Parse()

	if *queue > 65535 {
		fmt.Fprintln(os.Stderr, "nfqdelay: -queue must be 0..65535")
		os.Exit(2)
	}
	if *delay < 0 || *jitter < 0 {
		fmt.Fprintln(os.Stderr, "nfqdelay: -delay and -jitter must not be negative")
		os.Exit(2)
	}
	if *dist != "uniform" && *dist != "normal" {
		fmt.Fprintln(os.Stderr, "nfqdelay: -dist must be uniform or normal")
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	// The netlink reader and the releaser each want a whole thread; with
	// too few Ps the reader starves and delay grows (seen in the probe).
	if runtime.GOMAXPROCS(0) < 4 {
		runtime.GOMAXPROCS(4)
	}

	line := &delayLine{
		delay: *delay, jitter: *jitter, normal: *dist == "normal", reorder: *reorder,
		rng: rand.New(rand.NewSource(*seed)), wake: make(chan struct{}, 1),
	}

	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      uint16(*queue),
		MaxPacketLen: 0, // the payload is not needed, only the packet id
		MaxQueueLen:  65535,
		Copymode:     nfqueue.NfQnlCopyMeta,
		WriteTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nfqdelay: open queue %d: %v\n", *queue, err)
		os.Exit(1)
	}
	defer nf.Close()
	if err := nf.SetOption(netlink.NoENOBUFS, true); err != nil {
		fmt.Fprintf(os.Stderr, "nfqdelay: set NoENOBUFS: %v\n", err)
		os.Exit(1)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	go line.release(ctx, nf)
	var received uint64
	hook := func(a nfqueue.Attribute) int {
		if a.PacketID == nil {
			return 0
		}
		received++
		line.admit(*a.PacketID, time.Now())
		return 0
	}
	onError := func(e error) int {
		if ctx.Err() != nil {
			return 1
		}
		fmt.Fprintf(os.Stderr, "nfqdelay: netlink: %v\n", e)
		return 0
	}
	if err := nf.RegisterWithErrorFunc(ctx, hook, onError); err != nil {
		fmt.Fprintf(os.Stderr, "nfqdelay: register: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "nfqdelay: queue %d delay %v jitter %v (%s) reorder=%v\n",
		*queue, *delay, *jitter, *dist, *reorder)

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if *statsPath != "" {
				line.mu.Lock()
				rec := map[string]interface{}{
					"queue": *queue, "accepted": line.accepted, "held": line.held.Len(),
					"time": time.Now().Unix(),
				}
				line.mu.Unlock()
				b, _ := json.Marshal(rec)
				tmp := *statsPath + ".tmp"
				if os.WriteFile(tmp, append(b, '\n'), 0o644) == nil {
					_ = os.Rename(tmp, *statsPath)
				}
			}
		}
	}
}
