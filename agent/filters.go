package agent

import (
	"fmt"
	"os"

	"github.com/gswitch/gswitch/datapath/filters"
	"github.com/gswitch/gswitch/tables/filter"
)

// FilterConfig is one live filter (YAML "filters:"): a tcpdump expression
// evaluated on every frame received on its ports (none: every port), with
// per-filter packet and byte counters and an optional capture file.
type FilterConfig struct {
	Name       string               `yaml:"name"`
	Expression string               `yaml:"expression"`
	Ports      []uint32             `yaml:"ports,omitempty"`
	Capture    *FilterCaptureConfig `yaml:"capture,omitempty"`
}

// FilterCaptureConfig is a live filter's pcapng capture, rotated when it
// would grow past max_bytes (0: never), keeping max_files files in all.
type FilterCaptureConfig struct {
	File     string `yaml:"file"`
	MaxBytes int64  `yaml:"max_bytes,omitempty"`
	MaxFiles int    `yaml:"max_files,omitempty"`
}

// config is the datapath's form of the filter, with the program of an
// expression "bpf:@FILE" read from FILE (relative to gswitchd's working
// directory).
func (fc FilterConfig) config() (filters.Config, error) {
	expr, err := filter.ExpandBPFFile(fc.Expression, os.ReadFile)
	if err != nil {
		return filters.Config{}, fmt.Errorf("filter %s: %v", fc.Name, err)
	}
	c := filters.Config{Name: fc.Name, Expression: expr, Ports: fc.Ports}
	if fc.Capture != nil {
		c.Capture = &filters.CaptureConfig{File: fc.Capture.File, MaxBytes: fc.Capture.MaxBytes, MaxFiles: fc.Capture.MaxFiles}
	}
	return c, nil
}

// checkFilters checks the live filters: unique names, expressions that
// compile (the error names the filter and the position), ports that are
// configured.
func checkFilters(c *Config) error {
	s := filters.New(filters.Options{})
	seen := map[string]bool{}
	for _, fc := range c.Filters {
		if seen[fc.Name] {
			return configErr("filters: filter %s given twice", fc.Name)
		}
		seen[fc.Name] = true
		if err := checkFilterPorts(c.Ports, fc.Name, fc.Ports); err != nil {
			return configErr("filters: %v", err)
		}
		cfg, err := fc.config()
		if err != nil {
			return configErr("filters: %v", err)
		}
		if err := s.Check(cfg); err != nil {
			return configErr("filters: %v", err)
		}
	}
	return nil
}

func checkFilterPorts(ports []PortConfig, name string, want []uint32) error {
	for _, no := range want {
		found := false
		for _, p := range ports {
			found = found || p.Number == no
		}
		if !found {
			return fmt.Errorf("filter %s: no port %d", name, no)
		}
	}
	return nil
}

// startFilters installs the configured filters and makes the set a
// receive stage of every port, so that filters added later through the
// control socket can name any of them.
func (d *Agent) startFilters() error {
	d.filters = filters.New(filters.Options{Logger: d.log.With("component", "filters")})
	for _, fc := range d.st.Filters {
		cfg, err := fc.config()
		if err == nil {
			err = d.filters.Add(cfg)
		}
		if err != nil {
			d.filters.Close()
			return fmt.Errorf("%w: filters: %v", ErrConfig, err)
		}
	}
	for no := range d.ports {
		if err := d.addRxStage(no, d.filters); err != nil {
			return err
		}
	}
	return nil
}

// closeFilters stops the capture writers after what they have queued.
func (d *Agent) closeFilters() {
	if d.filters != nil {
		d.filters.Close()
	}
}

// The control socket's ctl.FilterSource.

func (s ctlSource) Filters() []filters.Info { return s.d.filters.Filters() }
func (s ctlSource) FilterInfo(name string) (filters.Info, error) {
	return s.d.filters.Info(name)
}
func (s ctlSource) AddFilter(c filters.Config) error {
	if err := checkFilterPorts(s.d.st.Ports, c.Name, c.Ports); err != nil {
		return err
	}
	if err := s.d.filters.Add(c); err != nil {
		return err
	}
	s.d.log.Info("filter added", "filter", c.Name, "expression", c.Expression, "ports", c.Ports)
	return nil
}
func (s ctlSource) DeleteFilter(name string) error {
	if err := s.d.filters.Delete(name); err != nil {
		return err
	}
	s.d.log.Info("filter deleted", "filter", name)
	return nil
}
