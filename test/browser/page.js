// The browser test's page (test/browser/README.md): calls helloworld.Greeter's SayHello and
// SayHelloStreamReply through connect-web's Connect and gRPC-Web transports, all four at once, on
// the server that the page's ?server= names (another origin: the calls are CORS requests), and
// shows each call's replies, or its error, as the <li> items of its <ul data-result>. When every
// call has settled, <body data-done> is set. Bundled by esbuild with greeter_pb.js, which
// protoc-gen-es generates from examples/greeter/greeter.proto into ./gen.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { Greeter } from "./gen/greeter_pb.js";

const server = new URL(window.location.href).searchParams.get("server");
// Each call's deadline, sent as connect-timeout-ms or grpc-timeout: one more request header that
// the preflight must allow.
const callOptions = { timeoutMs: 10000 };

// The library's defaults: the Connect transport speaks JSON, the gRPC-Web one binary protobuf.
const transports = [
  { id: "connect", name: "Connect ✓", transport: createConnectTransport({ baseUrl: server }) },
  { id: "grpc-web", name: "gRPC-Web ✓", transport: createGrpcWebTransport({ baseUrl: server }) },
];

function show(id, lines) {
  const list = document.getElementById(id);
  for (const line of lines) {
    const item = document.createElement("li");
    item.textContent = line;
    list.append(item);
  }
}

// Runs call(), which resolves to the reply texts, and shows them, or the error it failed with.
async function run(id, call) {
  try {
    show(id, await call());
  } catch (e) {
    show(id, ["error: " + String(e)]);
  }
}

const calls = [];
for (const { id, name, transport } of transports) {
  const client = createClient(Greeter, transport);
  calls.push(run(id + "-unary", async () => {
    const reply = await client.sayHello({ name }, callOptions);
    return [reply.message];
  }));
  calls.push(run(id + "-stream", async () => {
    const messages = [];
    for await (const reply of client.sayHelloStreamReply({ name, count: 3 }, callOptions)) {
      messages.push(reply.message);
    }
    return messages;
  }));
}
Promise.allSettled(calls).then(() => {
  document.body.dataset.done = "";
});
