package p4rt

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

var updateGoldens = flag.Bool("update", false, "rewrite the want of testdata/malformed/*.json with the server's answers")

// golden is one malformed-request case (testdata/malformed/*.json): an
// RPC, its request in protobuf JSON, and the answer the specification
// asks for.
type golden struct {
	Doc string `json:"doc"`
	// RPC is Write, Read, SetForwardingPipelineConfig or StreamChannel.
	RPC string `json:"rpc"`
	// Request is the request (StreamChannel: Stream, the messages in order).
	Request json.RawMessage   `json:"request,omitempty"`
	Stream  []json.RawMessage `json:"stream,omitempty"`
	// FixedP4Info puts the fixed P4Info into the request's config, after
	// replacing each [old, new] pair's first occurrence in its text
	// (p4/gswitch.p4info.txtpb).
	FixedP4Info bool        `json:"fixed_p4info,omitempty"`
	P4InfoEdits [][2]string `json:"p4info_edits,omitempty"`
	// NoPipeline runs the case before a pipeline is committed.
	NoPipeline bool `json:"no_pipeline,omitempty"`
	Want       want `json:"want"`
}

// want is the answer: the gRPC status code (StreamChannel: the code that
// ends the stream, or with StreamError, the code of the StreamError the
// server sends) and, for Write, the canonical code of each update.
type want struct {
	Code        string   `json:"code"`
	Details     []string `json:"details,omitempty"`
	StreamError bool     `json:"stream_error,omitempty"`
}

// codeName spells a code as the specification does (INVALID_ARGUMENT).
func codeName(c codes.Code) string {
	names := map[codes.Code]string{codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
		codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED", codes.FailedPrecondition: "FAILED_PRECONDITION",
		codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL",
		codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED"}
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", c)
}

// goldenState is the forwarding state the cases start from: an L2 entry,
// an IPv4 route, an ACL entry, multicast group 5 and an ACL entry that
// uses it.
func goldenState(t *testing.T, r *rig) {
	t.Helper()
	if err := r.write(0,
		ins(l2Entry(macB, 2)),
		ins(ipv4Entry([]byte{10, 1, 0, 0}, 16, act(ActionForward, []byte{1}))),
		ins(&p4v1.TableEntry{TableId: TableACL, Priority: 10, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{ternary(aclIPProto, []byte{17}, []byte{0xff})}}),
		mcUpdate(p4v1.Update_INSERT, mcGroup1(5, 1, 2)),
		ins(&p4v1.TableEntry{TableId: TableACL, Priority: 20, Action: act(ActionSetMulticastGroup, []byte{5}), Match: []*p4v1.FieldMatch{ternary(aclEthType, []byte{8, 6}, []byte{0xff, 0xff})}}),
	); err != nil {
		t.Fatal(err)
	}
}

// snapshot is the state a malformed request must leave as it was: every
// entity a wildcard read of every kind returns, and the pipeline config.
func snapshot(t *testing.T, r *rig) []proto.Message {
	t.Helper()
	var out []proto.Message
	if !r.srv.committed {
		return nil
	}
	es, err := r.readAll(wildcardAll()...)
	if err != nil {
		t.Fatalf("snapshot read: %v", err)
	}
	for _, e := range es {
		out = append(out, e)
	}
	cfg, err := r.cl.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 1, ResponseType: p4v1.GetForwardingPipelineConfigRequest_ALL})
	if err != nil {
		t.Fatalf("snapshot config: %v", err)
	}
	return append(out, cfg)
}

// TestMalformedRequests sends every request of testdata/malformed over a
// real gRPC connection to a server holding goldenState (a primary with
// election id 1 on an open stream) and checks the status code, the
// per-update error details of a Write, and that the state read back
// afterwards is what it was.
func TestMalformedRequests(t *testing.T) {
	files, err := filepath.Glob("testdata/malformed/*.json")
	if err != nil || len(files) < 30 {
		t.Fatalf("%d golden files (%v): want at least 30", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&g); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			r := newRig(t, 3, 0)
			r.primary(t, 1)
			if !g.NoPipeline {
				r.setPipeline(t, 1)
				goldenState(t, r)
			}
			before := snapshot(t, r)
			got := runGolden(t, r, &g)
			if after := snapshot(t, r); !slices.EqualFunc(before, after, proto.Equal) {
				t.Errorf("the state changed:\nbefore %v\nafter  %v", before, after)
			}
			if *updateGoldens {
				g.Want = got
				b, err := json.MarshalIndent(&g, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got.Code != g.Want.Code || got.StreamError != g.Want.StreamError || !slices.Equal(got.Details, g.Want.Details) {
				t.Errorf("%s\ngot  %+v\nwant %+v", g.Doc, got, g.Want)
			}
			if got.Code == "OK" || got.Code == "INTERNAL" {
				t.Errorf("a malformed request answered %s", got.Code)
			}
		})
	}
}

func unmarshalJSON(t *testing.T, raw json.RawMessage, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal(raw, m); err != nil {
		t.Fatalf("request %s: %v", raw, err)
	}
}

// runGolden sends the case's request and returns the answer.
func runGolden(t *testing.T, r *rig, g *golden) want {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	switch g.RPC {
	case "Write":
		var req p4v1.WriteRequest
		unmarshalJSON(t, g.Request, &req)
		_, err = r.cl.Write(ctx, &req)
	case "Read":
		var req p4v1.ReadRequest
		unmarshalJSON(t, g.Request, &req)
		var s p4v1.P4Runtime_ReadClient
		if s, err = r.cl.Read(ctx, &req); err == nil {
			for err == nil {
				_, err = s.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
	case "SetForwardingPipelineConfig":
		var req p4v1.SetForwardingPipelineConfigRequest
		unmarshalJSON(t, g.Request, &req)
		if g.FixedP4Info {
			txt := string(P4InfoText) // the file: prototext.Format's spacing is not stable
			for _, e := range g.P4InfoEdits {
				if !strings.Contains(txt, e[0]) {
					t.Fatalf("p4info edit: %q is not in the P4Info's text", e[0])
				}
				txt = strings.Replace(txt, e[0], e[1], 1)
			}
			info := &p4cfg.P4Info{}
			if err := prototext.Unmarshal([]byte(txt), info); err != nil {
				t.Fatalf("edited P4Info: %v", err)
			}
			if req.Config == nil {
				req.Config = &p4v1.ForwardingPipelineConfig{}
			}
			req.Config.P4Info = info
		}
		_, err = r.cl.SetForwardingPipelineConfig(ctx, &req)
	case "StreamChannel":
		return runStream(t, r, g)
	default:
		t.Fatalf("rpc %q", g.RPC)
	}
	out := want{Code: codeName(grpcstatus.Code(err))}
	for _, d := range grpcstatus.Convert(err).Details() {
		pe, ok := d.(*p4v1.Error)
		if !ok {
			t.Fatalf("detail %T, want p4.v1.Error", d)
		}
		out.Details = append(out.Details, codeName(codes.Code(pe.GetCanonicalCode())))
	}
	return out
}

// runStream opens a new stream, sends the case's messages and returns the
// first StreamError's code, or the code that ends the stream.
func runStream(t *testing.T, r *rig, g *golden) want {
	t.Helper()
	c := r.open(t)
	for _, raw := range g.Stream {
		var m p4v1.StreamMessageRequest
		unmarshalJSON(t, raw, &m)
		if err := c.s.Send(&m); err != nil {
			break // the server ended the stream; its code comes below
		}
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-c.msgs:
			if e := m.GetError(); e != nil {
				return want{Code: codeName(codes.Code(e.GetCanonicalCode())), StreamError: true}
			}
		case err := <-c.end:
			return want{Code: codeName(grpcstatus.Code(err))}
		case <-timeout:
			t.Fatal("the stream neither answered with a StreamError nor ended within 5 s")
		}
	}
}
