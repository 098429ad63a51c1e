package pcapfile

import "strconv"

func quoteBytes(b []byte) string { return strconv.Quote(string(b)) }
