// Package ctl is gswitchd's control socket: the protocol between gswitchd
// and gswitchctl, its server (Handler, Serve) and its client (Client).
//
// # Protocol
//
// HTTP/1.1 over a Unix stream socket (default /run/gswitchd.sock, created
// with mode 0600 so that only root, or the daemon's user, can open it;
// the file-system permission is the access control). The mode is set by
// the umask at bind time, not by a chmod afterwards, and Listen replaces
// only a stale socket at the path, never a file of another kind. Every query is a GET
// whose response is one JSON document (Content-Type application/json):
//
//	GET /v1/ports    []pipeline.PortInfo   ports: ofp_port description, link up, counters
//	GET /v1/tables   []pipeline.TableInfo  per table: entries, lookups, matched, classifier figures
//	GET /v1/flows    []pipeline.FlowInfo   every flow entry, as text, with counters
//	GET /v1/backend  gpu.EngineStats       the lookup backend: devices, fallbacks, keys per backend, each table's backend
//	GET /v1/stats    Stats                 the switch's own counters and the daemon's identity
//	GET /v1/groups   []pipeline.GroupInfo  every group: type, buckets (actions as text), counters
//	GET /v1/meters   []pipeline.MeterInfo  every meter: flags, bands, counters
//	GET /v1/neighbours, /v1/l3: the router's, see RouterSource
//	GET /v1/routes[?table=N]: the route tables with counters, see RouteSource
//	GET /v1/re: redundancy elimination's counters, see RESource
//	GET /v1/pubsub: content-based forwarding, see PubSubSource
//	GET, POST, DELETE /v1/filters[/NAME]: live filters, see FilterSource
//
// An unknown path gets 404, another method 405, both with a JSON body
// {"error": "..."}. The protocol is read-only except for live filters
// (FilterSource), which observe traffic: configuration goes through
// OpenFlow. A client that cannot reach the socket gets an error that
// says why: ErrNotRunning (no socket, or nobody answers on it) or
// ErrPermission (the socket's mode keeps the caller out). Field names are the Go field names of the types named above;
// new fields may be added, none is renamed or removed within /v1.
package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
)

// Stats is the answer to /v1/stats.
type Stats struct {
	DatapathID uint64
	Uptime     time.Duration
	Backend    string // what serves lookups (gpu.Engine.Device)
	Controller int    // controller connections past the handshake
	// PacketInsLimited counts packet-ins not sent because of a
	// connection's rate limit (controller_rate_limit); OutputDrops the
	// OpenFlow connections dropped because the peer stopped reading.
	PacketInsLimited uint64
	OutputDrops      uint64
	Counters         pipeline.Counters
	// Batches counts the receive batches by the path they ran.
	Batches BatchPaths
}

// BatchPaths counts receive batches by path (metric
// gswitch_batches_path_total): Direct, run in the port loop with their
// lookups straight to the classifier (no table was served by a device,
// or there is no GPU); Shared, handed to the queue's runner, their device
// tables' lookups in the shared device batches; Worker, run by a
// datapath worker (--rx-workers) together with its other receive queues'
// batches, lookups straight to the engine.
type BatchPaths struct {
	Direct uint64
	Shared uint64
	Worker uint64 `json:",omitempty"`
}

// Source is what the server reports on: the daemon implements it over a
// pipeline.Switch, a gpu.Engine and an openflow.Agent.
type Source interface {
	PortInfos() []pipeline.PortInfo
	TableInfos() []pipeline.TableInfo
	Flows() []pipeline.FlowInfo
	Backend() gpu.EngineStats
	Stats() Stats
	Groups() []pipeline.GroupInfo
	Meters() []pipeline.MeterInfo
}

// Handler serves the protocol for src.
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	route := func(path string, get func() any) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				writeJSON(w, http.StatusMethodNotAllowed, errorBody{"only GET is supported"})
				return
			}
			writeJSON(w, http.StatusOK, get())
		})
	}
	route("/v1/ports", func() any { return src.PortInfos() })
	route("/v1/tables", func() any { return src.TableInfos() })
	route("/v1/flows", func() any { return src.Flows() })
	route("/v1/backend", func() any { return src.Backend() })
	route("/v1/stats", func() any { return src.Stats() })
	route("/v1/groups", func() any { return src.Groups() })
	route("/v1/meters", func() any { return src.Meters() })
	route("/v1/neighbours", func() any { return neighbours(src) })
	route("/v1/l3", func() any { return l3Counters(src) })
	route("/v1/re", func() any { return reInfo(src) })
	route("/v1/pubsub", func() any { return pubsubInfo(src) })
	mux.HandleFunc("/v1/routes", routesHandler(src))
	mux.HandleFunc("/v1/filters", filtersHandler(src))
	mux.HandleFunc("/v1/filters/", filtersHandler(src))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no query %q (want /v1/ports, tables, flows, backend, stats, groups, meters, neighbours, l3, pubsub, routes, re or filters)", r.URL.Path)})
	})
	return mux
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// SocketMode is the control socket's mode: the daemon's user only (root,
// as gswitchd runs), since whoever can open it can read the switch's whole
// state and change its filters and routes.
const SocketMode = 0o600

// Listen creates the socket at path with mode SocketMode from the start
// (the umask is narrowed around the bind, so there is no moment when a
// wider mode lets another user connect), replacing only a stale socket
// (one nobody answers on). A live socket is an error, and so is anything
// at path that is not a socket (a regular file, a directory, a symbolic
// link): gswitchd never deletes what it did not create.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("ctl: %s exists and is not a socket (%s): refusing to replace it", path, kindOf(fi.Mode()))
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("ctl: %s: another gswitchd answers on it", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ctl: removing the stale socket: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ctl: %w", err)
	}
	l, err := listenUmask(path, 0o777&^SocketMode)
	if err != nil {
		return nil, fmt.Errorf("ctl: %w", err)
	}
	// The umask already gave the mode; this only guards against a umask
	// that was wider in the first place (chmod never widens past it here).
	if err := os.Chmod(path, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("ctl: %w", err)
	}
	return l, nil
}

// listenUmask binds a Unix socket at path with the process umask set to
// mask for the bind (the socket file's mode is 0777 &^ umask). The umask
// is process-wide: gswitchd calls this at start, before it creates any
// other file, and umaskMu keeps two Listens of one process apart.
func listenUmask(path string, mask int) (net.Listener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	return net.Listen("unix", path)
}

var umaskMu sync.Mutex

// kindOf names a file type for an error message.
func kindOf(m os.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case os.ModeDir:
		return "a directory"
	case os.ModeSymlink:
		return "a symbolic link"
	case os.ModeNamedPipe:
		return "a named pipe"
	case os.ModeDevice, os.ModeDevice | os.ModeCharDevice:
		return "a device"
	}
	return m.Type().String()
}

// Serve answers on l until ctx is done, then closes l (removing the
// socket file).
func Serve(ctx context.Context, l net.Listener, src Source) error {
	srv := &http.Server{Handler: Handler(src), ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Client queries a gswitchd over its control socket.
type Client struct {
	hc   *http.Client
	path string
}

// ErrNotRunning says that no gswitchd answers on the socket: the file is
// missing, or nothing listens on it.
var ErrNotRunning = errors.New("gswitchd is not running")

// ErrPermission says that the socket exists but the caller may not open
// it (it is created with mode 0600 for the daemon's user).
var ErrPermission = errors.New("permission denied")

// NewClient returns a client for the socket at path; nothing is dialled
// until a query.
func NewClient(path string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, path: path}
}

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Ports returns /v1/ports.
func (c *Client) Ports(ctx context.Context) ([]pipeline.PortInfo, error) {
	var v []pipeline.PortInfo
	return v, c.get(ctx, "/v1/ports", &v)
}

// Tables returns /v1/tables.
func (c *Client) Tables(ctx context.Context) ([]pipeline.TableInfo, error) {
	var v []pipeline.TableInfo
	return v, c.get(ctx, "/v1/tables", &v)
}

// Flows returns /v1/flows.
func (c *Client) Flows(ctx context.Context) ([]pipeline.FlowInfo, error) {
	var v []pipeline.FlowInfo
	return v, c.get(ctx, "/v1/flows", &v)
}

// Backend returns /v1/backend.
func (c *Client) Backend(ctx context.Context) (gpu.EngineStats, error) {
	var v gpu.EngineStats
	return v, c.get(ctx, "/v1/backend", &v)
}

// Groups returns /v1/groups.
func (c *Client) Groups(ctx context.Context) ([]pipeline.GroupInfo, error) {
	var v []pipeline.GroupInfo
	return v, c.get(ctx, "/v1/groups", &v)
}

// Meters returns /v1/meters.
func (c *Client) Meters(ctx context.Context) ([]pipeline.MeterInfo, error) {
	var v []pipeline.MeterInfo
	return v, c.get(ctx, "/v1/meters", &v)
}

// dialError explains a failed query: ErrNotRunning or ErrPermission with
// the socket's path, else the error as it came.
func (c *Client) dialError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("ctl: %w: no daemon answers on %s (start gswitchd, or give its --ctl-socket with --socket)", ErrNotRunning, c.path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("ctl: %s: %w (the socket is mode 0600: run as root or as the daemon's user)", c.path, ErrPermission)
	}
	return fmt.Errorf("ctl: %s: %w", path, err)
}

// Stats returns /v1/stats.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var v Stats
	return v, c.get(ctx, "/v1/stats", &v)
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gswitchd"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.dialError(path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("ctl: %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		_ = json.Unmarshal(body, &e)
		return fmt.Errorf("ctl: %s: %s: %s", path, resp.Status, e.Error)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("ctl: %s: bad answer: %w", path, err)
	}
	return nil
}
