// Starts fauxqs on 127.0.0.1 only (scripts/fauxqs.sh start runs this).
//
// fauxqs's own startFauxqs() and its CLI always listen on 0.0.0.0; its
// exported buildApp() returns the Fastify app without listening, so the
// address is ours to choose. Queue URLs it hands out name the host of the
// request (127.0.0.1:PORT); clients send every call to the endpoint anyway.
//
//   node serve.mjs PORT        (FAUXQS_LOGGER=true logs every request)
import { buildApp } from "fauxqs";

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error(`usage: node serve.mjs PORT (got '${process.argv[2] ?? ""}')`);
  process.exit(2);
}
const app = buildApp({ logger: process.env.FAUXQS_LOGGER === "true" });
const address = await app.listen({ port, host: "127.0.0.1" });
console.log(`fauxqs listening on ${address}`);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    app.close().finally(() => process.exit(0));
  });
}
