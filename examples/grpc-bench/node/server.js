// The Node.js server of examples/grpc-bench: @grpc/grpc-js, with the helloworld.Greeter service
// loaded from ../proto at start (@grpc/proto-loader); SayHello replies with the message it was
// sent, decoded and encoded again.
//
//     npm ci && node server.js 127.0.0.1:50051
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const address = process.argv[2];
if (!address) {
  console.error('usage: node server.js HOST:PORT');
  process.exit(2);
}

const definition = protoLoader.loadSync(path.join(__dirname, '..', 'proto', 'helloworld.proto'), {
  keepCase: true,
  longs: String,
  enums: String,
});
const { helloworld } = grpc.loadPackageDefinition(definition);

const server = new grpc.Server();
server.addService(helloworld.Greeter.service, {
  SayHello(call, callback) {
    callback(null, { response: call.request.request });
  },
});
server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error) => {
  if (error) {
    console.error(`server: ${error.message}`);
    process.exit(1);
  }
});
process.on('SIGTERM', () => server.forceShutdown());
