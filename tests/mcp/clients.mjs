// The official TypeScript MCP clients against `sbsh mcp` over stdio:
//   node clients.mjs sdk     @modelcontextprotocol/sdk (v1, speaks 2025-11-25)
//   node clients.mjs client  @modelcontextprotocol/client (v2, pinned to 2026-07-28)
//   node clients.mjs old     @modelcontextprotocol/sdk 1.20 (speaks 2025-06-18 at most)
// Lists the tools, calls each one, checks a failing command, progress on a 3 s command, a
// cancellation that leaves the shell's state, and a client killed mid-call whose command's
// process must be gone. Each client then does the same essentials over HTTP
// (`sbsh mcp --http`), a cancel and the end of the session included. The environment
// (run.sh) gives SBSH, a private XDG_RUNTIME_DIR and HOME, and NODE_PATH to the installed
// packages.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const flavor = process.argv[2];
const role = process.argv[3] ?? 'main';
const sbsh = process.env.SBSH;
const work = process.env.SBSH_TEST_DIR;
const require = createRequire(path.join(process.env.NODE_PATH, 'x.js'));
const load = (p) => import(require.resolve(p));

const v1 = flavor === 'sdk' || flavor === 'old';
// The revision each client asks for, and so gets.
const expectedVersion = { sdk: '2025-11-25', old: '2025-06-18' }[flavor];

// Records the revision the server answered initialize with, as the transport passes it on.
function spyVersion(transport, seen) {
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => handler,
    set: (f) => {
      handler = f && ((m, extra) => {
        if (m?.result?.protocolVersion) seen.version = m.result.protocolVersion;
        return f(m, extra);
      });
    },
  });
}
const negotiated = {};

async function makeClient() {
  let Client, StdioClientTransport, options = {};
  if (v1) {
    ({ Client } = await load('@modelcontextprotocol/sdk/client/index.js'));
    ({ StdioClientTransport } = await load('@modelcontextprotocol/sdk/client/stdio.js'));
  } else {
    ({ Client } = await load('@modelcontextprotocol/client'));
    ({ StdioClientTransport } = await load('@modelcontextprotocol/client/stdio'));
    options = { versionNegotiation: { mode: { pin: '2026-07-28' } } };
  }
  const client = new Client({ name: `sbsh-test-${flavor}`, version: '1.0.0' }, options);
  const transport = new StdioClientTransport({ command: sbsh, args: ['mcp'], env: process.env, stderr: 'inherit' });
  spyVersion(transport, negotiated);
  await client.connect(transport);
  return client;
}

// `sbsh mcp --http 127.0.0.1:0`: its URL and bearer token, read from what it writes on stderr.
async function startHttpServer() {
  const server = spawn(sbsh, ['mcp', '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'], env: process.env });
  let err = '';
  server.stderr.on('data', (d) => { err += d; });
  const url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(err)?.[1], 20000, 'sbsh mcp --http to listen');
  const tokenFile = /TOKEN being the text of (\S+)/.exec(err)?.[1];
  const token = tokenFile ? fs.readFileSync(tokenFile, 'utf8').trim() : '';
  return { server, url, token };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = cond();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}
const alive = (pid) => {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return e.code !== 'ESRCH';
  }
  // A zombie is not running: read its state.
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
function sleeper(pidfile) {
  return `sh -c 'echo $$ > ${pidfile}.new && mv ${pidfile}.new ${pidfile} && exec sleep 30'`;
}
async function readPid(pidfile) {
  return waitFor(() => {
    try {
      return parseInt(fs.readFileSync(pidfile, 'utf8'), 10) || 0;
    } catch {
      return 0;
    }
  }, 20000, pidfile);
}
const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
const callV2 = (client, name, args, options) => client.callTool({ name, arguments: args }, options);
let invoke;

async function main() {
  const client = await makeClient();
  invoke = v1 ? call : callV2;
  const session = `s-${flavor}`;
  // The revision each client speaks: v1 the initialize handshake, v2 the stateless one.
  if (flavor === 'client') {
    assert.equal(client.getProtocolEra(), 'modern');
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
  } else {
    assert.equal(client.getServerVersion().name, 'sbsh');
    assert.equal(negotiated.version, expectedVersion);
  }

  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['run_command', 'list_sessions', 'create_session', 'remove_session',
    'restart_session', 'start_process', 'list_processes', 'kill_process', 'wait_process', 'process_logs',
    'await_command', 'cancel_command', 'send_input', 'read_file', 'write_file', 'list_files', 'edit_file', 'search_files']);
  for (const t of tools) assert.ok(t.outputSchema, `${t.name} has an output schema`);

  // Each tool, with a result the client validated against its output schema.
  let r = await invoke(client, 'run_command', { command: 'cd /tmp; X=1', session });
  assert.equal(r.isError, false);
  r = await invoke(client, 'run_command', { command: 'echo $PWD $X', session });
  assert.equal(r.structuredContent.stdout, '/tmp 1\n');
  // The text a model reads: a status line, then the output as it is.
  assert.match(r.content[0].text, /^exit code 0, \d+ ms\n--- stdout ---\n\/tmp 1\n$/);
  r = await invoke(client, 'create_session', { name: `made-${flavor}`, cwd: '/tmp', env: { GREETING: 'hi' } });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.session.name, `made-${flavor}`);
  r = await invoke(client, 'list_sessions', {});
  assert.ok(r.structuredContent.sessions.some((s) => s.name === `made-${flavor}`));
  r = await invoke(client, 'restart_session', { name: `made-${flavor}` });
  assert.equal(r.isError, false, JSON.stringify(r));
  r = await invoke(client, 'start_process', { command: 'echo started; exec sleep 30', session, name: `bg-${flavor}` });
  assert.equal(r.isError, false, JSON.stringify(r));
  const id = r.structuredContent.id;
  const bgPid = r.structuredContent.pid;
  r = await invoke(client, 'list_processes', {});
  assert.ok(r.structuredContent.processes.some((p) => p.id === id));
  let logs;
  for (let i = 0; i < 100; i++) {
    logs = await invoke(client, 'process_logs', { id });
    if (logs.structuredContent.stdout === 'started\n') break;
    await sleep(100);
  }
  assert.equal(logs.structuredContent.stdout, 'started\n');
  r = await invoke(client, 'kill_process', { id: String(id) });
  assert.equal(r.isError, false, JSON.stringify(r));
  r = await invoke(client, 'wait_process', { id, timeout_seconds: 10 });
  assert.notEqual(r.structuredContent.state, 'running', JSON.stringify(r));
  // The pid is the keeper's, which reaps what the command left after reporting its end:
  // it is gone soon after, not always by the time wait answers.
  for (let i = 0; bgPid && alive(bgPid) && i < 100; i++) await sleep(100);
  if (bgPid) assert.ok(!alive(bgPid), 'the killed process is gone');
  r = await invoke(client, 'remove_session', { name: `made-${flavor}` });
  assert.deepEqual(r.structuredContent, { removed: `made-${flavor}` });

  // A command that outlives the call: answered after wait_seconds with its id, awaited later;
  // its cd persists. Another, left running, is cancelled.
  r = await invoke(client, 'run_command', { command: 'echo early; sleep 2; cd /; echo late', session, wait_seconds: 0.5 });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.running, true, JSON.stringify(r));
  assert.equal(r.structuredContent.stdout, 'early\n');
  const cmd = r.structuredContent.id;
  assert.match(cmd, /^%[0-9]+$/);
  r = await invoke(client, 'await_command', { id: cmd, wait_seconds: 20 });
  assert.equal(r.structuredContent.running, false, JSON.stringify(r));
  assert.equal(r.structuredContent.exit_code, 0);
  assert.equal(r.structuredContent.stdout, 'early\nlate\n');
  r = await invoke(client, 'run_command', { command: 'pwd', session });
  assert.equal(r.structuredContent.stdout, '/\n');
  r = await invoke(client, 'run_command', { command: 'sleep 30', session, wait_seconds: 0.3 });
  assert.equal(r.structuredContent.running, true, JSON.stringify(r));
  r = await invoke(client, 'cancel_command', { id: r.structuredContent.id });
  assert.equal(r.structuredContent.cancelled, true, JSON.stringify(r));
  assert.equal(r.structuredContent.running, false);
  await invoke(client, 'run_command', { command: 'cd /tmp', session });

  // A failing command is a result with isError, not a thrown error.
  r = await invoke(client, 'run_command', { command: 'echo oops >&2; exit 7', session });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.exit_code, 7);
  assert.equal(r.structuredContent.stderr, 'oops\n');

  // Progress on a 3 s command: at least two notifications, increasing.
  const progress = [];
  r = await invoke(client, 'run_command', { command: 'sleep 3; echo done', session },
    { onprogress: (p) => progress.push(p.progress), timeout: 30000 });
  assert.equal(r.structuredContent.stdout, 'done\n');
  assert.ok(progress.length >= 2, `progress: ${progress}`);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1], `increasing: ${progress}`);

  // Cancellation: the command stops, the shell keeps its state.
  await invoke(client, 'run_command', { command: 'Y=kept', session });
  const pidfile = path.join(work, `cancel-${flavor}.pid`);
  const ac = new AbortController();
  const pending = invoke(client, 'run_command', { command: sleeper(pidfile), session }, { signal: ac.signal });
  const pid = await readPid(pidfile);
  assert.ok(alive(pid));
  ac.abort();
  await assert.rejects(pending);
  r = await invoke(client, 'run_command', { command: 'echo $Y', session });
  assert.equal(r.structuredContent.stdout, 'kept\n');
  await waitFor(() => !alive(pid), 10000, `pid ${pid} to end after the cancel`);

  // A client that vanishes mid-call: its command's process is gone.
  const vanishFile = path.join(work, `vanish-${flavor}.pid`);
  const child = spawn(process.execPath, [process.argv[1], flavor, 'vanish'], { stdio: 'inherit', env: process.env });
  const vpid = await readPid(vanishFile);
  assert.ok(alive(vpid));
  child.kill('SIGKILL');
  await waitFor(() => !alive(vpid), 15000, `pid ${vpid} to end after its client was killed`);

  await agentTask(client);
  await client.close();
  await overHttp();
  console.log(`ok: ${flavor}`);
}

// An agent's task, as each client sees it: a 5 MB output within the result's budget, whose
// middle reads back through the call its marker names; edit_file with zero, two and one
// matches; a search that skips node_modules.
async function agentTask(client) {
  let r = await invoke(client, 'run_command', { command: 'seq 1 700000', session: `big-${flavor}` });
  const out = r.structuredContent.stdout;
  assert.ok(r.content[0].text.length <= 30000, `a text of ${r.content[0].text.length} characters`);
  assert.equal(r.structuredContent.stdout_truncated, true);
  const marker = /\n\[sbsh: [^\n]*read them with process_logs (\{[^\n]*\})\]\n/.exec(out);
  assert.ok(marker, out.slice(0, 300));
  const args = JSON.parse(marker[1]);
  const head = out.slice(0, marker.index + 1);
  assert.equal(args.stdout_offset, head.length);
  const lastOfHead = parseInt(head.trimEnd().split('\n').pop(), 10);
  r = await invoke(client, 'process_logs', args);
  assert.equal(r.structuredContent.stdout.slice(0, r.structuredContent.stdout.indexOf('\n')), String(lastOfHead + 1));

  const root = path.join(work, `project-${flavor}`);
  fs.mkdirSync(path.join(root, 'node_modules', 'pkg'), { recursive: true });
  fs.writeFileSync(path.join(root, 'app.py'), 'def f():\n    return 1\n\ndef g():\n    return 1\n');
  fs.writeFileSync(path.join(root, 'node_modules', 'pkg', 'index.js'), 'return 1\n');
  const session = `edit-${flavor}`;
  r = await invoke(client, 'create_session', { name: session, root });
  assert.equal(r.isError, false, JSON.stringify(r));
  const edit = (old_string, new_string) =>
    invoke(client, 'edit_file', { session, path: 'app.py', old_string, new_string });
  r = await edit('return 2', 'return 3');
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /occurs 0 times/);
  r = await edit('    return 1\n', '    return 2\n');
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /occurs 2 times/);
  assert.equal(fs.readFileSync(path.join(root, 'app.py'), 'utf8'), 'def f():\n    return 1\n\ndef g():\n    return 1\n');
  r = await edit('def g():\n    return 1', 'def g():\n    return 2');
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.replacements, 1);
  assert.equal(fs.readFileSync(path.join(root, 'app.py'), 'utf8'), 'def f():\n    return 1\n\ndef g():\n    return 2\n');
  // A question at a terminal, answered.
  r = await invoke(client, 'run_command', { command: "read -p 'Name? ' n; echo \"hi $n\"", session, tty: true });
  assert.equal(r.structuredContent.waiting_for_input, true, JSON.stringify(r.structuredContent));
  assert.equal(r.structuredContent.prompt, 'Name? ');
  r = await invoke(client, 'send_input', { id: r.structuredContent.id, text: 'Ada' });
  assert.equal(r.structuredContent.exit_code, 0, JSON.stringify(r.structuredContent));
  assert.equal(r.structuredContent.stdout, 'Ada\r\nhi Ada\r\n');
  r = await invoke(client, 'search_files', { session, pattern: 'return [0-9]' });
  assert.deepEqual(r.structuredContent.matches, [
    { path: 'app.py', line: 2, text: '    return 1' }, { path: 'app.py', line: 5, text: '    return 2' }]);
  // The same in a snapshot of the project (made by the CLI: MCP's create_session makes none).
  const snap = `snap-${flavor}`;
  const made = spawnSync(sbsh, ['session', 'create', snap, '--snapshot', root], { env: process.env, encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
  r = await invoke(client, 'search_files', { session: snap, pattern: 'return [0-9]' });
  assert.deepEqual(r.structuredContent.matches.map((m) => m.path), ['app.py', 'app.py'], JSON.stringify(r));
}

// Each client over Streamable HTTP: the same revision, state kept, a wrong argument seen as a
// result, a cancel answered (the client goes on), and the session ended by the client.
async function overHttp() {
  let Client, StreamableHTTPClientTransport, options = {};
  if (v1) {
    ({ Client } = await load('@modelcontextprotocol/sdk/client/index.js'));
    ({ StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js'));
  } else {
    ({ Client, StreamableHTTPClientTransport } = await load('@modelcontextprotocol/client'));
    options = { versionNegotiation: { mode: { pin: '2026-07-28' } } };
  }
  const { server, url, token } = await startHttpServer();
  try {
    const client = new Client({ name: `sbsh-test-${flavor}-http`, version: '1.0.0' }, options);
    const transport = new StreamableHTTPClientTransport(new URL(url),
      { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    const seen = {};
    spyVersion(transport, seen);
    await client.connect(transport);
    if (v1) {
      assert.equal(seen.version, expectedVersion);
      assert.equal(transport.protocolVersion, expectedVersion);
    } else {
      assert.equal(client.getProtocolEra(), 'modern');
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    }
    const call = invoke;
    const session = `h-${flavor}`;
    let r = await call(client, 'run_command', { command: 'cd /tmp; W=1', session });
    assert.equal(r.isError, false, JSON.stringify(r));
    r = await call(client, 'run_command', { command: 'echo $PWD $W', session });
    assert.equal(r.structuredContent.stdout, '/tmp 1\n');
    r = await call(client, 'run_command', { command: 'true', session, wait_seconds: 'soon' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /'wait_seconds' must be a number/);

    const pidfile = path.join(work, `http-cancel-${flavor}.pid`);
    const ac = new AbortController();
    const pending = call(client, 'run_command', { command: sleeper(pidfile), session }, { signal: ac.signal });
    const pid = await readPid(pidfile);
    ac.abort();
    await assert.rejects(pending);
    await waitFor(() => !alive(pid), 10000, `pid ${pid} to end after the cancel over HTTP`);
    r = await call(client, 'run_command', { command: 'echo $W', session });
    assert.equal(r.structuredContent.stdout, '1\n');

    await transport.terminateSession();
    await client.close();
  } finally {
    server.kill('SIGTERM');
    await new Promise((res) => (server.exitCode !== null ? res() : server.on('exit', res)));
  }
}

async function vanish() {
  const client = await makeClient();
  invoke = v1 ? call : callV2;
  await invoke(client, 'run_command', { command: sleeper(path.join(work, `vanish-${flavor}.pid`)), session: `v-${flavor}` },
    { timeout: 60000 });
}

(role === 'vanish' ? vanish() : main()).catch((e) => {
  console.error(e);
  process.exit(1);
});
