package pubsubapi

// The generated code is committed. To regenerate it (Debian packages
// protobuf-compiler and protoc-gen-go-grpc; protoc-gen-go built from the
// module's own google.golang.org/protobuf, so that the generated code
// matches the runtime):
//
//	go build -o /tmp/bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
//	PATH=/tmp/bin:$PATH go generate ./controlproto/pubsubapi

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative pubsubapi.proto
