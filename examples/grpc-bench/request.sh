#!/bin/sh
# Prints the suite's request_hex: payload.txtpb (payload.json in protobuf's text format) encoded
# as a helloworld.HelloRequest by protoc.
cd "$(dirname "$0")" || exit 1
protoc -Iproto --encode=helloworld.HelloRequest proto/helloworld.proto <payload.txtpb |
    od -An -v -tx1 | tr -d ' \n'
echo
