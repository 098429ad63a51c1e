package gpu

import (
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
)

// The flow conformance cases run unchanged on every Backend, like the LPM
// ones: the backend's answers to LookupFlow on PackSoA'd keys are compared
// bit for bit with the flow.Table's own LookupBatch, after the load and after
// every synced round of updates.

// compareFlow looks keys up in the backend and in the table and fails on the
// first difference. It returns how many packets matched some rule.
func compareFlow(t *testing.T, b Backend, id TableID, tab *flow.Table, keys []flow.Key, what string) int {
	t.Helper()
	n := len(keys)
	soa := flow.PackSoA(keys, tab.UsedWords(), nil)
	got, want := make([]flow.RuleID, n), make([]flow.RuleID, n)
	for i := range got {
		got[i] = 12345 // every answer must be written
	}
	if err := b.LookupFlow(id, soa, n, got); err != nil {
		t.Fatalf("%s: %s flow lookup: %v", what, b.Name(), err)
	}
	tab.LookupBatch(keys, want)
	// The same keys through a Batch holding fewer packets than it can, so
	// that its key columns are Cap words apart.
	batch := batchFlow(t, b, id, soa, n, len(tab.UsedWords()), what)
	// Small lookups, as the datapath's shared batches make them (a device
	// runs them with a warp per packet: FlowWarpPerPacket).
	for _, m := range []int{1, 7, 64, 1000} {
		if m > n {
			break
		}
		lo := m * 31 % (n - m + 1)
		small := make([]flow.RuleID, m)
		if err := b.LookupFlow(id, flow.PackSoA(keys[lo:lo+m], tab.UsedWords(), nil), m, small); err != nil {
			t.Fatalf("%s: %s flow lookup of %d: %v", what, b.Name(), m, err)
		}
		for i, r := range small {
			if r != want[lo+i] {
				t.Fatalf("%s: %s lookup of %d: packet %d (%v): got rule %d, table says %d", what, b.Name(), m, lo+i, keys[lo+i], r, want[lo+i])
			}
		}
	}
	hits := 0
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: %s: packet %d (%v): got rule %d, table says %d", what, b.Name(), i, keys[i], got[i], want[i])
		}
		if batch[i] != want[i] {
			t.Fatalf("%s: %s batch: packet %d (%v): got rule %d, table says %d", what, b.Name(), i, keys[i], batch[i], want[i])
		}
		if want[i] != flow.NoMatch {
			hits++
		}
	}
	return hits
}

// flowLife loads tab into b, then runs rounds of changes (each synced and
// applied as one Update), comparing after the load and every round. change
// makes round r's changes to the table. It returns how many Updates were
// whole images and how many bubbles.
func flowLife(t *testing.T, b Backend, id TableID, tab *flow.Table, keys []flow.Key, rounds int, change func(r int)) (fulls, bubbles, hits int) {
	t.Helper()
	u := tab.Mirror().Sync()
	if err := b.Load(id, Flow, u.Full); err != nil {
		t.Fatalf("load: %v", err)
	}
	hits = compareFlow(t, b, id, tab, keys, "after load")
	for r := 0; r < rounds; r++ {
		change(r)
		u := tab.Mirror().Sync()
		if u.Full != nil {
			fulls++
		}
		bubbles += len(u.Bubbles)
		if err := b.Apply(id, u); err != nil {
			t.Fatalf("round %d: apply: %v", r, err)
		}
		hits += compareFlow(t, b, id, tab, keys, "after update round")
	}
	return fulls, bubbles, hits
}

// testRandomFlow builds a table of one algorithm from a quarter of a
// synthetic rule set, then adds the rest in rounds while deleting random
// rules; one round adds rules on metadata, a key word outside the
// projection, which forces a rebuild (a whole image of a new generation).
func testRandomFlow(t *testing.T, b Backend, algo flow.Algo, spec string, npkt, rounds int) {
	sp, err := flow.ParseSynthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(algo) + 3
	rules := sp.Generate(seed)
	keys := flow.SynthTraffic(sp, rules, npkt, seed+1)
	rng := rand.New(rand.NewPCG(seed, 77))
	for i := 0; i < npkt/8; i++ { // some packets that match little or nothing
		var k flow.Key
		for j := range k {
			k[j] = rng.Uint32()
		}
		keys[rng.IntN(len(keys))] = k
	}
	tab, err := flow.NewTable(flow.Config{Algo: algo, MaxEntries: 1 << 16, ClassCapacity: 256, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	next := len(rules) / 4
	for i := 0; i < next; i++ {
		if _, _, err := tab.Add(rules[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	var live []flow.RuleID
	tab.Rules(func(id flow.RuleID, _ *flow.Rule) bool { live = append(live, id); return true })
	per := (len(rules) - next + rounds - 1) / rounds
	change := func(r int) {
		for i := 0; i < per && next < len(rules); i++ {
			id, _, err := tab.Add(rules[next], 0)
			if err != nil {
				t.Fatalf("round %d: add: %v", r, err)
			}
			live = append(live, id)
			next++
		}
		for i := 0; i < per/3 && len(live) > 0; i++ {
			j := rng.IntN(len(live))
			tab.DeleteID(live[j])
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		if r == rounds/2 {
			for i := 0; i < 20; i++ {
				rl := rules[rng.IntN(len(rules))]
				if err := rl.Match.SetFieldUint(flow.FieldMetadata, 0, ^uint64(0)); err != nil {
					t.Fatal(err)
				}
				rl.Priority = uint16(rng.Uint32())
				id, _, err := tab.Add(rl, 0)
				if err != nil {
					t.Fatalf("round %d: add on metadata: %v", r, err)
				}
				live = append(live, id)
			}
		}
	}
	fulls, bubbles, hits := flowLife(t, b, TableID(10+algo), tab, keys, rounds, change)
	t.Logf("%s %v %s: %d rules (%d classes) at the end, %d packets, %d rounds: %d whole images, %d bubbles, %d hits; %d bytes on the backend",
		b.Name(), algo, spec, tab.Len(), tab.Stats().Classes, len(keys), rounds, fulls, bubbles, hits, b.MemoryUsed())
	if fulls == 0 || bubbles == 0 {
		t.Errorf("the case should exercise both whole images and bubbles: %d, %d", fulls, bubbles)
	}
	if hits == 0 {
		t.Errorf("no packet matched a rule")
	}
}

// testRandomFlowAll runs testRandomFlow for each algorithm; big (the device
// backends) with more rules and packets than the CPU run, which CI runs
// under the race detector.
func testRandomFlowAll(t *testing.T, b Backend, big bool) {
	if big {
		testRandomFlow(t, b, flow.Linear, "2000,16", 1<<12, 12)
		for _, a := range []flow.Algo{flow.Tuple, flow.Bloom, flow.Merge} {
			testRandomFlow(t, b, a, "20000,64,2,4", 1<<15, 20)
			testRandomFlow(t, b, a, "4000,200", 1<<14, 10)
		}
		return
	}
	testRandomFlow(t, b, flow.Linear, "600,8", 1<<10, 6)
	for _, a := range []flow.Algo{flow.Tuple, flow.Bloom, flow.Merge} {
		testRandomFlow(t, b, a, "4000,32,2,4", 1<<12, 8)
		testRandomFlow(t, b, a, "1000,100", 1<<11, 5)
	}
}

// acl1Path is the ClassBench acl1 set: $GSWITCH_ACL1 when set (the device
// machine gets a copy carried in .cuda/data), else ../shared/data.
func acl1Path(t testing.TB) string {
	if p := os.Getenv("GSWITCH_ACL1"); p != "" {
		return p
	}
	return shareddata.Path(t, "classbench/acl1_20000.txt")
}

// testACL1Flow runs the ClassBench acl1 set with each algorithm: load, then
// rounds deleting a tenth of the rules and adding them back.
func testACL1Flow(t *testing.T, b Backend, big bool) {
	fh, err := os.Open(acl1Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cb, err := flow.ReadClassBench(fh, "acl1")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := flow.ExpandClassBench(cb)
	if err != nil {
		t.Fatal(err)
	}
	for _, algo := range []flow.Algo{flow.Linear, flow.Tuple, flow.Bloom, flow.Merge} {
		npkt := 1 << 12
		if big {
			npkt = 1 << 16
		}
		if algo == flow.Linear {
			npkt /= 16
		}
		keys := flow.ClassBenchTraffic(cb, npkt, 5)
		tab, err := flow.NewTable(flow.Config{Algo: algo, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]flow.RuleID, len(rules))
		for i := range rules {
			if ids[i], _, err = tab.Add(rules[i], 0); err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(algo), 1))
		change := func(r int) {
			var gone []int
			for i := 0; i < len(rules)/10; i++ {
				j := rng.IntN(len(rules))
				if _, ok := tab.DeleteID(ids[j]); ok {
					gone = append(gone, j)
				}
			}
			if r%2 == 1 { // every other round, put them back
				for _, j := range gone {
					if ids[j], _, err = tab.Add(rules[j], 0); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		rounds := 2
		if big {
			rounds = 4
		}
		fulls, bubbles, hits := flowLife(t, b, TableID(20+algo), tab, keys, rounds, change)
		t.Logf("%s acl1 %v: %d rules, %d entries, %d packets: %d whole images, %d bubbles, %d hits",
			b.Name(), algo, len(cb), len(rules), len(keys), fulls, bubbles, hits)
	}
}

// testFlowRejects checks that bad calls and bad updates return errors and
// change nothing.
func testFlowRejects(t *testing.T, b Backend) {
	sp, _ := flow.ParseSynthetic("500,16")
	rules := sp.Generate(1)
	keys := flow.SynthTraffic(sp, rules, 2048, 2)
	for _, algo := range []flow.Algo{flow.Linear, flow.Tuple, flow.Bloom, flow.Merge} {
		tab, err := flow.NewTable(flow.Config{Algo: algo, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rules {
			if _, _, err := tab.Add(rules[i], 0); err != nil {
				t.Fatal(err)
			}
		}
		id := TableID(30 + algo)
		full := tab.Mirror().Sync().Full
		if err := b.Load(id, Flow, full); err != nil {
			t.Fatal(err)
		}
		compareFlow(t, b, id, tab, keys, "after load")
		soa := flow.PackSoA(keys, tab.UsedWords(), nil)
		out := make([]flow.RuleID, len(keys))
		if err := b.LookupFlow(id+100, soa, len(keys), out); !errors.Is(err, ErrNoTable) {
			t.Errorf("lookup in a missing table: %v", err)
		}
		if err := b.LookupFlow(id, soa[:len(soa)-1], len(keys), out); !errors.Is(err, ErrShortKeys) {
			t.Errorf("short keys: %v", err)
		}
		if err := b.LookupFlow(id, soa, len(keys), out[:10]); !errors.Is(err, ErrShortOut) {
			t.Errorf("short output: %v", err)
		}
		if err := b.LookupFlow(id, nil, 0, nil); err != nil {
			t.Errorf("empty lookup: %v", err)
		}
		if err := b.LookupLPM4(id, []uint32{1}, make([]uint32, 1)); !errors.Is(err, ErrKind) {
			t.Errorf("LPM lookup in a flow table: %v", err)
		}
		gen := full.Generation
		nent := uint32(len(full.Words[flow.RegionEntries]))
		good := bubble.Bubble{Region: flow.RegionHeader, Offset: flow.HdrCount, Value: full.Words[flow.RegionHeader][flow.HdrCount]}
		bad := []bubble.Update{
			{Generation: gen + 1, Bubbles: []bubble.Bubble{good}},                                                      // wrong generation
			{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: flow.RegionEntries, Offset: nent}}},              // outside a region
			{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 9}}},                                             // no such region
			{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: flow.RegionHeader, Offset: flow.HdrP}}},          // fixed header word
			{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: flow.RegionSeeds, Offset: 0, Value: 1}}},         // seeds
			{Generation: gen, Full: bubble.NewImage([]string{"header"}, []int{3})},                                     // corrupt image
			{Generation: gen, Full: bubble.NewImage([]string{"a", "b", "c", "d", "e", "f"}, []int{40, 0, 0, 0, 0, 0})}, // no magic
		}
		if algo != flow.Linear {
			bad = append(bad, bubble.Update{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: flow.RegionSeeds, Offset: 1, Value: 7}}})
		}
		for i, u := range bad {
			if err := b.Apply(id, u); err == nil {
				t.Errorf("%v: bad update %d accepted", algo, i)
			}
			compareFlow(t, b, id, tab, keys, "after a rejected update")
		}
		// Garbage in the descriptors and the order (accepted: they are in
		// range) must not make a lookup read outside the image: the
		// lookups re-check every offset. Answers are compared with a View
		// of the same garbage.
		rng := rand.New(rand.NewPCG(uint64(algo), 5))
		var bs []bubble.Bubble
		for _, r := range []bubble.Region{flow.RegionClasses, flow.RegionOrder, flow.RegionEntries, flow.RegionBloom} {
			n := len(full.Words[r])
			for i := 0; i < 200 && n > 0; i++ {
				v := rng.Uint32()
				if rng.IntN(2) == 0 {
					v &= 0xff
				}
				bs = append(bs, bubble.Bubble{Region: r, Offset: uint32(rng.IntN(n)), Value: v})
			}
		}
		bs = append(bs, bubble.Bubble{Region: flow.RegionHeader, Offset: flow.HdrCount, Value: 0xffffffff})
		seen := map[[2]uint32]bool{}
		uniq := bs[:0]
		for i := len(bs) - 1; i >= 0; i-- { // bubbles of one update name distinct words
			k := [2]uint32{uint32(bs[i].Region), bs[i].Offset}
			if !seen[k] {
				seen[k] = true
				uniq = append(uniq, bs[i])
			}
		}
		if err := b.Apply(id, bubble.Update{Generation: gen, Bubbles: uniq}); err != nil {
			t.Fatalf("%v: garbage in range: %v", algo, err)
		}
		v, err := flow.NewView(full) // the generation's View, seeing the garbage in place
		if err != nil {
			t.Fatal(err)
		}
		if err := full.Apply(uniq); err != nil {
			t.Fatal(err)
		}
		want := make([]flow.RuleID, len(keys))
		if err := v.LookupBatchSoA(soa, len(keys), want); err != nil {
			t.Fatal(err)
		}
		if err := b.LookupFlow(id, soa, len(keys), out); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if out[i] != want[i] {
				t.Fatalf("%v: garbage image: packet %d: %s says %d, a View %d", algo, i, b.Name(), out[i], want[i])
			}
		}
	}
}

// batchFlow classifies the n packets of soa (p words each, SoA with stride
// n) through a Batch of capacity n+5 and returns the results.
func batchFlow(t *testing.T, b Backend, id TableID, soa []uint32, n, p int, what string) []flow.RuleID {
	t.Helper()
	bt, err := b.NewBatch(Flow, p, n+5)
	if err != nil {
		t.Fatalf("%s: %s: NewBatch: %v", what, b.Name(), err)
	}
	defer bt.Free()
	for j := 0; j < p; j++ {
		copy(bt.Keys[j*bt.Cap:j*bt.Cap+n], soa[j*n:j*n+n])
	}
	for i := range bt.Out {
		bt.Out[i] = 12345
	}
	bt.N = n
	if !bt.Ready() {
		t.Fatalf("%s: %s: a batch not submitted is not Ready", what, b.Name())
	}
	if err := b.Submit(id, bt); err != nil {
		t.Fatalf("%s: %s: Submit: %v", what, b.Name(), err)
	}
	// Ready comes true without a Wait (the datapath's workers poll it).
	for deadline := time.Now().Add(10 * time.Second); !bt.Ready(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: the batch was not Ready after 10 s", what, b.Name())
		}
	}
	if err := bt.Wait(); err != nil {
		t.Fatalf("%s: %s: batch: %v", what, b.Name(), err)
	}
	return append([]flow.RuleID(nil), bt.Rules()[:n]...)
}
