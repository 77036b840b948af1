// Preloaded with `node --require` so that every server the process starts
// listens on 127.0.0.1 only. server-everything calls `app.listen(PORT)` with
// no host, which would bind every interface; interop tests must stay on
// loopback.
'use strict';

const net = require('node:net');

const LOOPBACK = '127.0.0.1';
const originalListen = net.Server.prototype.listen;

// listen(port[, host][, backlog][, cb]) and listen({port, host, ...}[, cb]):
// rewrite the host in both call shapes, keep every other argument as given.
net.Server.prototype.listen = function listenOnLoopback(...args) {
  const [first] = args;
  if (first !== null && typeof first === 'object' && !Array.isArray(first)) {
    if (first.path === undefined) {
      args[0] = { ...first, host: LOOPBACK };
    }
  } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    if (typeof args[1] === 'string') {
      args[1] = LOOPBACK;
    } else {
      args.splice(1, 0, LOOPBACK);
    }
  }
  return originalListen.apply(this, args);
};
