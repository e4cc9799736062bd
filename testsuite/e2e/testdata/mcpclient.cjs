// mcpclient.cjs is an MCP client this project did not write: the official
// TypeScript SDK (@modelcontextprotocol/sdk, installed by .ci/run outside the
// clone, its directory in TOOLGATE_MCP_NODE_SDK) over streamable HTTP. The
// e2e suite drives it, one command per process:
//
//   node mcpclient.cjs URL TOKEN RUN list
//   node mcpclient.cjs URL TOKEN RUN call TOOL ARGS_JSON [IDEMPOTENCY_KEY]
//
// TOOLGATE_MCP_TIMEOUT_MS bounds a call's wait between two progress
// notifications (default 120000).
//
// It prints one JSON line: {"tools": [...]} or {"result": CallToolResult,
// "progress": N}, or {"error": "..."} and exits 1.
'use strict';
const { createRequire } = require('module');
const path = require('path');

const sdkDir = process.env.TOOLGATE_MCP_NODE_SDK;
if (!sdkDir) {
  console.log(JSON.stringify({ error: 'TOOLGATE_MCP_NODE_SDK is not set' }));
  process.exit(1);
}
const sdk = createRequire(path.join(sdkDir, 'node_modules', 'x.js'));
const { Client } = sdk('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = sdk('@modelcontextprotocol/sdk/client/streamableHttp.js');

async function main() {
  const [url, token, run, cmd, ...rest] = process.argv.slice(2);
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (run) headers['Toolgate-Run'] = run;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'toolgate-e2e-node', version: '1.0.0' });
  await client.connect(transport);
  try {
    if (cmd === 'list') {
      const res = await client.listTools();
      console.log(JSON.stringify({ tools: res.tools }));
    } else if (cmd === 'call') {
      const [name, args, key] = rest;
      let progress = 0;
      const params = { name, arguments: JSON.parse(args) };
      if (key) params._meta = { 'toolgate/idempotency_key': key };
      const res = await client.callTool(params, undefined, {
        timeout: Number(process.env.TOOLGATE_MCP_TIMEOUT_MS || 120000),
        resetTimeoutOnProgress: true,
        onprogress: () => { progress++; },
      });
      console.log(JSON.stringify({ result: res, progress }));
    } else {
      throw new Error('unknown command ' + cmd);
    }
  } finally {
    await client.close();
  }
}

main().then(() => process.exit(0), (err) => {
  console.log(JSON.stringify({ error: String(err && err.message || err) }));
  process.exit(1);
});
