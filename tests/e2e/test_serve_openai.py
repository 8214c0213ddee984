"""The official OpenAI client (npm `openai`) against `ramforge serve` (issue 23, item 6).

The client is installed with npm at test time into a cache folder outside the checkout
($RAMFORGE_NPM_CACHE, else ~/.cache/ramforge/npm-openai-<version>), once; without node,
npm or the registry the case skips with the reason. A Node script drives the client:
models.list, completions.create (plain, with stop, streamed), chat.completions.create
(plain and streamed) and an error case; each answer is compared with what the server
answers over plain HTTP (http.client), so the client reads exactly what serve sends.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import Skip, check, run_main  # noqa: E402
from test_serve import PROMPT, Ctx, Server  # noqa: E402

OPENAI_VERSION = "6.49.0"  # the npm client tested; one pinned version, installed once

SCRIPT = r"""
const OpenAI = require('openai');
const [port, stopWord] = process.argv.slice(2);
const client = new OpenAI({apiKey: 'k', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0});
const prompt = 'Hello my name is';
const msgs = [{role: 'system', content: 'You are a test.'}, {role: 'user', content: 'Hi.'}];
(async () => {
  const out = {};
  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  const c = await client.completions.create({model: 'm', prompt, max_tokens: 16, temperature: 0});
  out.completion = {text: c.choices[0].text, finish: c.choices[0].finish_reason,
                    usage: c.usage, fingerprint: c.system_fingerprint};
  const s = await client.completions.create({model: 'm', prompt, max_tokens: 16, temperature: 0,
                                             stop: [stopWord]});
  out.stopped = {text: s.choices[0].text, finish: s.choices[0].finish_reason};
  let streamed = '', chunks = 0;
  for await (const ch of await client.completions.create({model: 'm', prompt, max_tokens: 16,
                                                          temperature: 0, stream: true})) {
    streamed += ch.choices[0].text; chunks++;
  }
  out.streamed = {text: streamed, chunks};
  const chat = await client.chat.completions.create({model: 'm', messages: msgs, max_tokens: 12,
                                                     temperature: 0});
  out.chat = {content: chat.choices[0].message.content, role: chat.choices[0].message.role,
              finish: chat.choices[0].finish_reason, usage: chat.usage};
  let chatText = '', usage = null;
  const cs = await client.chat.completions.create({model: 'm', messages: msgs, max_tokens: 12,
                                                   temperature: 0, stream: true,
                                                   stream_options: {include_usage: true}});
  for await (const ch of cs) {
    if (ch.choices.length) chatText += ch.choices[0].delta.content || '';
    if (ch.usage) usage = ch.usage;
  }
  out.chatStream = {content: chatText, usage};
  try {
    await client.completions.create({model: 'm', prompt, max_tokens: 4, n: 2});
    out.error = null;
  } catch (e) {
    out.error = {status: e.status, message: e.message};
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


def openai_client():
    """The folder whose node_modules holds the pinned client (installed once), or Skip."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise Skip("node and npm are needed to install the OpenAI client (npm openai)")
    cache = os.environ.get("RAMFORGE_NPM_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "ramforge", f"npm-openai-{OPENAI_VERSION}")
    if os.path.isfile(os.path.join(cache, "node_modules", "openai", "package.json")):
        return cache
    os.makedirs(cache, exist_ok=True)
    p = subprocess.run([npm, "install", "--prefix", cache, "--no-audit", "--no-fund",
                        "--no-save", f"openai@{OPENAI_VERSION}"],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise Skip(f"npm cannot install openai@{OPENAI_VERSION} (registry unreachable?): "
                   f"{p.stderr.strip().splitlines()[-1:] or p.returncode}")
    return cache


def case_openai_client(c):
    cache = openai_client()
    model = c.model("small")
    with Server(c, model, "--api-key", "k", "--alias", "ramforge-test") as sv:
        auth = {"Authorization": "Bearer k"}
        ref = sv.ok("POST", "/completion", {"prompt": PROMPT, "n_predict": 16,
                                            "temperature": 0}, auth)
        text = ref["content"]
        word = text[len(text) // 2:len(text) // 2 + 3]
        msgs = [{"role": "system", "content": "You are a test."},
                {"role": "user", "content": "Hi."}]
        chat_ref = sv.ok("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 12,
                                                          "temperature": 0}, auth)
        script = os.path.join(c.tmp, "client.js")
        with open(script, "w") as f:
            f.write(SCRIPT)
        env = dict(os.environ, NODE_PATH=os.path.join(cache, "node_modules"))
        p = subprocess.run(["node", script, str(sv.port), word], capture_output=True,
                           text=True, timeout=300, env=env)
        check(p.returncode == 0, f"the OpenAI client failed: {p.stderr[-2000:]}")
        out = json.loads(p.stdout)
    check(out["models"] == ["ramforge-test"], f"models.list: {out['models']}")
    comp = out["completion"]
    check(comp["text"] == text and comp["finish"] == "length" and
          comp["usage"]["completion_tokens"] == 16 and comp["fingerprint"],
          f"completions.create: {comp} vs {text!r}")
    check(out["stopped"] == {"text": text[:text.index(word)], "finish": "stop"},
          f"stop {word!r}: {out['stopped']}")
    check(out["streamed"]["text"] == text and out["streamed"]["chunks"] == 17,
          f"streamed: a chunk a token, then the last: {out['streamed']}")
    want = chat_ref["choices"][0]["message"]["content"]
    check(out["chat"]["content"] == want and out["chat"]["role"] == "assistant" and
          out["chat"]["usage"] == chat_ref["usage"], f"chat: {out['chat']} vs {chat_ref}")
    check(out["chatStream"]["content"] == want and
          out["chatStream"]["usage"]["completion_tokens"] ==
          chat_ref["usage"]["completion_tokens"], f"streamed chat: {out['chatStream']}")
    err = out["error"]
    check(err and err["status"] == 400 and "Field 'n': Value must be between" in err["message"],
          f"n: 2 refused with 400 as llama-server: {err}")
    return 0


CASES = {"openai_client": case_openai_client}

if __name__ == "__main__":
    run_main(CASES, Ctx, "rf-serve-openai-")
