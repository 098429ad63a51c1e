package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gswitch/gswitch/datapath/filters"
)

// FilterSource is what a daemon with live filters adds to Source:
//
//	GET    /v1/filters          []filters.Info  every live filter with its counters
//	GET    /v1/filters/NAME     filters.Info    one filter (404: none of that name)
//	POST   /v1/filters          FilterRequest   add a filter; 200 with its filters.Info, 400 with
//	                                            {"error": ...} for a bad expression (one line naming
//	                                            the filter and the position), 409 for a name in use
//	DELETE /v1/filters/NAME                     delete a filter; 200 with its last filters.Info, 404: none
//
// These are the control socket's only requests that change the daemon:
// live filters observe traffic and change no forwarding state. A Source
// without it answers an empty list, and refuses additions with 404.
type FilterSource interface {
	Filters() []filters.Info
	FilterInfo(name string) (filters.Info, error)
	AddFilter(c filters.Config) error
	DeleteFilter(name string) error
}

// FilterRequest is POST /v1/filters's body.
type FilterRequest struct {
	Name       string
	Expression string
	Ports      []uint32               `json:",omitempty"`
	Capture    *filters.CaptureConfig `json:",omitempty"`
}

func filtersHandler(src Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fs, ok := src.(FilterSource)
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1/filters"), "/")
		switch {
		case r.Method == http.MethodGet && name == "":
			if !ok {
				writeJSON(w, http.StatusOK, []filters.Info{})
				return
			}
			writeJSON(w, http.StatusOK, fs.Filters())
		case r.Method == http.MethodGet:
			if !ok {
				writeJSON(w, http.StatusNotFound, errorBody{"no filter " + name})
				return
			}
			in, err := fs.FilterInfo(name)
			if err != nil {
				writeJSON(w, http.StatusNotFound, errorBody{err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, in)
		case r.Method == http.MethodPost && name == "":
			if !ok {
				writeJSON(w, http.StatusNotFound, errorBody{"this daemon has no live filters"})
				return
			}
			var req FilterRequest
			dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody{"bad request: " + err.Error()})
				return
			}
			err := fs.AddFilter(filters.Config{Name: req.Name, Expression: req.Expression, Ports: req.Ports, Capture: req.Capture})
			switch {
			case errors.Is(err, filters.ErrExists):
				writeJSON(w, http.StatusConflict, errorBody{err.Error()})
				return
			case err != nil:
				writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
				return
			}
			in, _ := fs.FilterInfo(req.Name)
			writeJSON(w, http.StatusOK, in)
		case r.Method == http.MethodDelete && name != "":
			if !ok {
				writeJSON(w, http.StatusNotFound, errorBody{"no filter " + name})
				return
			}
			in, err := fs.FilterInfo(name)
			if err == nil {
				err = fs.DeleteFilter(name)
			}
			if err != nil {
				writeJSON(w, http.StatusNotFound, errorBody{err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, in)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{"want GET /v1/filters[/NAME], POST /v1/filters or DELETE /v1/filters/NAME"})
		}
	}
}

// Filters returns /v1/filters.
func (c *Client) Filters(ctx context.Context) ([]filters.Info, error) {
	var v []filters.Info
	return v, c.get(ctx, "/v1/filters", &v)
}

// Filter returns /v1/filters/NAME.
func (c *Client) Filter(ctx context.Context, name string) (filters.Info, error) {
	var v filters.Info
	return v, c.get(ctx, "/v1/filters/"+url.PathEscape(name), &v)
}

// AddFilter adds a live filter. The error of a refused filter is the
// daemon's one line.
func (c *Client) AddFilter(ctx context.Context, req FilterRequest) (filters.Info, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return filters.Info{}, err
	}
	var v filters.Info
	return v, c.do(ctx, http.MethodPost, "/v1/filters", body, &v)
}

// DeleteFilter deletes a live filter and returns its last counters.
func (c *Client) DeleteFilter(ctx context.Context, name string) (filters.Info, error) {
	var v filters.Info
	return v, c.do(ctx, http.MethodDelete, "/v1/filters/"+url.PathEscape(name), nil, &v)
}

// do sends a request that changes the daemon; an error answer becomes the
// daemon's message alone.
func (c *Client) do(ctx context.Context, method, path string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://gswitchd"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.dialError(path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("ctl: %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("ctl: %s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("ctl: %s: bad answer: %w", path, err)
	}
	return nil
}
