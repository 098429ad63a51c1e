package filter

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// tokKind is a token of the pcap-filter language, as libpcap's scanner.l
// classifies them.
type tokKind int

const (
	tEOF     tokKind = iota
	tNum             // number (decimal, 0x hex, leading-0 octal) or a named constant
	tID              // a name (or a \-escaped word)
	tHID             // dotted IPv4 address, 2 to 4 parts
	tHID6            // IPv6 address
	tEID             // MAC address
	tKeyword         // keyword: text holds it
	tOp              // punctuation and operators: text holds it
)

type token struct {
	kind tokKind
	text string
	num  uint32
	pos  int // byte offset in the expression
}

func (t token) String() string {
	if t.kind == tEOF {
		return "end of expression"
	}
	return strconv.Quote(t.text)
}

// keywords maps the scanner's keywords to their token text; aliases map to
// one canonical spelling.
var keywords = map[string]string{}

func init() {
	for _, k := range strings.Fields(`dst src arp rarp ip sctp tcp udp icmp igmp igrp pim vrrp carp radio
		ip6 icmp6 ah esp atalk aarp decnet lat sca moprc mopdl iso esis isis l1 l2 iih lsp snp csnp psnp
		clnp stp ipx netbeui host net mask port portrange proto protochain gateway type subtype ra ta
		less greater byte broadcast multicast inbound outbound ifindex vlan mpls pppoed pppoes geneve
		lane llc metac bcc oam oamf4 oamf4ec oamf4sc sc ilmic vpi vci connectmsg metaconnect reason action
		fisu lssu msu hfisu hlssu hmsu sio opc dpc sls hsio hopc hdpc hsls`) {
		keywords[k] = k
	}
	for _, k := range []string{"link", "ether", "ppp", "slip", "fddi", "tr", "wlan"} {
		keywords[k] = "link"
	}
	alias := map[string]string{"es-is": "esis", "is-is": "isis", "direction": "dir", "dir": "dir",
		"address1": "addr1", "addr1": "addr1", "address2": "addr2", "addr2": "addr2", "address3": "addr3",
		"addr3": "addr3", "address4": "addr4", "addr4": "addr4", "and": "and", "&&": "and", "or": "or",
		"||": "or", "not": "!", "len": "len", "length": "len", "on": "ifname", "ifname": "ifname",
		"rset": "rset", "ruleset": "rset", "rnr": "rnr", "rulenum": "rnr", "srnr": "srnr", "subrulenum": "srnr",
		"lsu": "lssu"}
	for k, v := range alias {
		keywords[k] = v
	}
}

// namedNums are the scanner's named constants (icmptype, tcp-syn, ...).
var namedNums = map[string]uint32{
	"icmptype": 0, "icmpcode": 1, "icmp-echoreply": 0, "icmp-unreach": 3, "icmp-sourcequench": 4,
	"icmp-redirect": 5, "icmp-echo": 8, "icmp-routeradvert": 9, "icmp-routersolicit": 10,
	"icmp-timxceed": 11, "icmp-paramprob": 12, "icmp-tstamp": 13, "icmp-tstampreply": 14,
	"icmp-ireq": 15, "icmp-ireqreply": 16, "icmp-maskreq": 17, "icmp-maskreply": 18,
	"icmp6type": 0, "icmp6code": 1, "icmp6-destinationunreach": 1, "icmp6-packettoobig": 2,
	"icmp6-timeexceeded": 3, "icmp6-parameterproblem": 4, "icmp6-echo": 128, "icmp6-echoreply": 129,
	"icmp6-multicastlistenerquery": 130, "icmp6-multicastlistenerreportv1": 131,
	"icmp6-multicastlistenerdone": 132, "icmp6-routersolicit": 133, "icmp6-routeradvert": 134,
	"icmp6-neighborsolicit": 135, "icmp6-neighboradvert": 136, "icmp6-redirect": 137,
	"icmp6-routerrenum": 138, "icmp6-nodeinformationquery": 139, "icmp6-nodeinformationresponse": 140,
	"icmp6-ineighbordiscoverysolicit": 141, "icmp6-ineighbordiscoveryadvert": 142,
	"icmp6-multicastlistenerreportv2": 143, "icmp6-homeagentdiscoveryrequest": 144,
	"icmp6-homeagentdiscoveryreply": 145, "icmp6-mobileprefixsolicit": 146,
	"icmp6-mobileprefixadvert": 147, "icmp6-certpathsolicit": 148, "icmp6-certpathadvert": 149,
	"icmp6-multicastrouteradvert": 151, "icmp6-multicastroutersolicit": 152,
	"icmp6-multicastrouterterm": 153,
	"tcpflags":                  13, "tcp-fin": 0x01, "tcp-syn": 0x02, "tcp-rst": 0x04, "tcp-push": 0x08,
	"tcp-ack": 0x10, "tcp-urg": 0x20, "tcp-ece": 0x40, "tcp-cwr": 0x80,
}

const (
	reB   = `[0-9A-Fa-f][0-9A-Fa-f]?`
	reB2  = `[0-9A-Fa-f]{4}`
	reN   = `(?:0[Xx][0-9A-Fa-f]+|[0-9]+)`
	reW   = `[0-9A-Fa-f]{1,4}`
	reMAC = `(?:` + reB + `:` + reB + `:` + reB + `:` + reB + `:` + reB + `:` + reB + `|` +
		reB + `-` + reB + `-` + reB + `-` + reB + `-` + reB + `-` + reB + `|` +
		reB + `\.` + reB + `\.` + reB + `\.` + reB + `\.` + reB + `\.` + reB + `|` +
		reB2 + `\.` + reB2 + `\.` + reB2 + `|` + reB2 + reB2 + reB2 + `)`
)

var (
	reNum  = regexp.MustCompile(`^` + reN)
	reHID  = regexp.MustCompile(`^` + reN + `(?:\.` + reN + `){1,3}`)
	reMACx = regexp.MustCompile(`^` + reMAC)
	reBadE = regexp.MustCompile(`^` + reB + `:+(?:` + reB + `:+)+`)
	reID   = regexp.MustCompile(`^[A-Za-z0-9](?:[-_.A-Za-z0-9]*[.A-Za-z0-9])?`)
	reV6   = regexp.MustCompile(`^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*`)
	reEsc  = regexp.MustCompile(`^\\[^ !()\n\t]+`)
)

// lex splits an expression into tokens with flex's longest-match rule over
// the same patterns as libpcap's scanner (keywords win ties over names,
// numbers over names, dotted addresses over names).
func lex(s string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			i++
			continue
		}
		rest := s[i:]
		best, kind := 0, tEOF
		try := func(n int, k tokKind) {
			if n > best {
				best, kind = n, k
			}
		}
		// Order of the calls is the tie order: earlier rules win equal lengths.
		if m := reID.FindString(rest); m != "" {
			if _, ok := keywords[m]; ok {
				try(len(m), tKeyword)
			}
		}
		for _, kw := range []string{"es-is", "is-is"} {
			if strings.HasPrefix(rest, kw) {
				try(len(kw), tKeyword)
			}
		}
		for _, op := range []string{">=", "<=", "!=", "==", "<<", ">>", "&&", "||"} {
			if strings.HasPrefix(rest, op) {
				try(2, tOp)
			}
		}
		if strings.ContainsRune("+-*/%:[]!<>()&|^=", rune(c)) {
			try(1, tOp)
		}
		if m := reMACx.FindString(rest); m != "" {
			try(len(m), tEID)
		}
		if m := reNum.FindString(rest); m != "" {
			try(len(m), tNum)
		}
		if m := reHID.FindString(rest); m != "" {
			try(len(m), tHID)
		}
		if m := reV6.FindString(rest); m != "" {
			if _, ok := parseIPv6(m); ok {
				try(len(m), tHID6)
			}
		}
		if m := reBadE.FindString(rest); m != "" && len(m) > best {
			return nil, fmt.Errorf("position %d: bogus ethernet address %s", i, m)
		}
		if m := reID.FindString(rest); m != "" {
			if _, ok := namedNums[m]; ok {
				try(len(m), tNum) // named constants are listed before the ID rule
			}
			try(len(m), tID)
		}
		if m := reEsc.FindString(rest); m != "" {
			try(len(m), tID)
		}
		if best == 0 {
			return nil, fmt.Errorf("position %d: illegal character %q", i, c)
		}
		text := rest[:best]
		t := token{kind: kind, text: text, pos: i}
		switch kind {
		case tKeyword:
			if kw, ok := keywords[text]; ok {
				t.text = kw
			} else {
				t.text = text
			}
			if t.text == "and" || t.text == "or" || t.text == "!" {
				t.kind = tOp
				if t.text == "!" {
					t.text = "!"
				}
			}
		case tOp:
			switch text {
			case "&&":
				t.text = "and"
			case "||":
				t.text = "or"
			case "==":
				t.text = "="
			}
		case tNum:
			if v, ok := namedNums[text]; ok {
				t.num = v
			} else {
				v, err := stou(text)
				if err != nil {
					return nil, fmt.Errorf("position %d: %v", i, err)
				}
				t.num = v
			}
		case tID:
			if text[0] == '\\' {
				t.text = text[1:]
			}
		}
		toks = append(toks, t)
		i += best
	}
	toks = append(toks, token{kind: tEOF, pos: len(s)})
	return toks, nil
}

// stou converts a number the way libpcap does: 0x hex, leading 0 octal,
// else decimal, 32 bits.
func stou(s string) (uint32, error) {
	base, digits := 10, s
	switch {
	case len(s) > 1 && (s[1] == 'x' || s[1] == 'X') && s[0] == '0':
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	var v uint64
	for _, c := range digits {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		}
		if d >= uint64(base) {
			if base == 8 {
				return 0, fmt.Errorf("number %s contains non-octal digit", s)
			}
			return 0, fmt.Errorf("number %s contains non-decimal digit", s)
		}
		v = v*uint64(base) + d
		if v > 0xffffffff {
			return 0, fmt.Errorf("number %s overflows 32 bits", s)
		}
	}
	return uint32(v), nil
}
