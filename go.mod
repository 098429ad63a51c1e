module github.com/gswitch/gswitch

go 1.26.8
