// The HTTP/1.1 server of Node's standard library (http, llhttp beneath in its strict mode), as
// the smuggling suite's reference (test/http1_smuggling/run_vectors.py): every request that its
// parser lets through is answered 200 once its body has been read in full. Prints
// "listening on 127.0.0.1:PORT".
'use strict';
const http = require('http');

const server = http.createServer((req, res) => {
  let n = 0;
  req.on('data', (chunk) => { n += chunk.length; });
  req.on('error', () => {
    if (!res.headersSent) res.writeHead(400, { 'Content-Type': 'text/plain' });
    res.end('bad body');
  });
  req.on('end', () => {
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`ok ${req.method} ${req.url} ${n}`);
  });
});
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
