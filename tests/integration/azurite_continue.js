// Preloaded into Azurite by tests/integration/stores.py (NODE_OPTIONS=--require).
//
// Node answers every "Expect: 100-continue" with "100 Continue" at once. For a request with no
// body Azurite's final answer follows at once, often in the same TCP segment, and the Azure SDK
// for C++ in pyarrow then loses that answer (Azure/azure-sdk-for-cpp#550): it waits until
// Azurite closes the idle connection (about 6 s) and sends the request again. Every
// delete_file on Azurite makes such a request (the lease release, answered 404), so one
// delete in a few dozen took 7 s. HTTP lets a server skip the 100 when it needs no body: so here.
"use strict";
const http = require("http");
const createServer = http.createServer;
http.createServer = function (...args) {
  const server = createServer.apply(this, args);
  server.on("checkContinue", (req, res) => {
    if (req.headers["content-length"] !== "0") {
      res.writeContinue();
    }
    server.emit("request", req, res);
  });
  return server;
};
