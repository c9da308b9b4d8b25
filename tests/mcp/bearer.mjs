// Preloaded (node --import) into the conformance suite, which has no option for headers:
// every HTTP request it makes, through fetch or undici, carries
// "Authorization: Bearer $SBSH_MCP_TOKEN", the token sbsh mcp --http requires. SBSH_UNDICI
// is the path of the undici the suite imports; its global dispatcher is fetch's too.
const token = process.env.SBSH_MCP_TOKEN;
const { Agent, setGlobalDispatcher } = await import(process.env.SBSH_UNDICI);

function withAuth(headers) {
  const value = `Bearer ${token}`;
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    const flat = headers.flat();
    for (let i = 0; i < flat.length; i += 2) if (String(flat[i]).toLowerCase() === 'authorization') return headers;
    return [...flat, 'authorization', value];
  }
  const entries = typeof headers[Symbol.iterator] === 'function' ? [...headers] : Object.entries(headers);
  if (entries.some(([k]) => k.toLowerCase() === 'authorization')) return headers;
  return Object.fromEntries([...entries, ['authorization', value]]);
}

setGlobalDispatcher(new Agent().compose((dispatch) => (opts, handler) => dispatch({ ...opts, headers: withAuth(opts.headers) }, handler)));
