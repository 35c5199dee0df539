"""`kimi serve` through the openai package and curl: completions and chat, streamed and whole, usage, stop strings,
seeds, /v1/models and /health (tests/serve/conftest.py starts the server)."""
import json

from helpers import client, curl, metrics, post_json


def complete(server, **kw):
    kw.setdefault("model", "tiny")
    return client(server).completions.create(**kw)


def stream_completion(server, **kw):
    """(text, finish_reason, usage or None, chunks) of a streamed completion."""
    kw.setdefault("model", "tiny")
    text, finish, usage, chunks = "", None, None, []
    for c in client(server).completions.create(stream=True, **kw):
        chunks.append(c)
        if c.usage is not None:
            usage = c.usage
        for ch in c.choices:
            text += ch.text
            finish = ch.finish_reason or finish
    return text, finish, usage, chunks


def test_models_and_health(server):
    assert [m.id for m in client(server).models.list().data] == ["tiny"]
    status, body = curl(server.url + "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})


def test_completion_whole_and_streamed_agree_with_exact_usage(server):
    whole = complete(server, prompt="Hello, world", max_tokens=12, temperature=0)
    assert whole.object == "text_completion"
    assert whole.choices[0].finish_reason == "length"
    # The byte-level tokenizer: one token per byte of the prompt.
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens, whole.usage.total_tokens) == (12, 12, 24)
    text, finish, usage, chunks = stream_completion(server, prompt="Hello, world", max_tokens=12, temperature=0,
                                                    stream_options={"include_usage": True})
    assert text == whole.choices[0].text and finish == "length"
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 12, 24)
    assert chunks[-1].choices == [] and all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1
    # Without include_usage no chunk carries usage.
    assert stream_completion(server, prompt="Hello, world", max_tokens=12, temperature=0)[2] is None


def test_prompt_as_token_ids(server):
    ids = list(b"Hello, world")
    a = complete(server, prompt="Hello, world", max_tokens=6, temperature=0)
    b = complete(server, prompt=ids, max_tokens=6, temperature=0)
    assert a.choices[0].text == b.choices[0].text and b.usage.prompt_tokens == 12


def test_sse_wire_format_with_curl(server):
    status, body = curl("-N", server.url + "/v1/completions", data=json.dumps(
        {"model": "tiny", "prompt": "abc", "max_tokens": 3, "temperature": 0, "stream": True,
         "stream_options": {"include_usage": True}}).encode())
    assert status == 200
    events = body.decode().split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    payloads = [json.loads(e[len("data: "):]) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-1])
    assert payloads[-2]["choices"][0]["finish_reason"] == "length"
    assert payloads[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_stop_strings_cut_the_text_streamed_and_whole(server):
    base = complete(server, prompt="The stop test", max_tokens=40, temperature=0).choices[0].text
    # A stop string from the middle of the greedy text (its first occurrence there).
    stop = base[10:13]
    cut = base[:base.index(stop)]
    whole = complete(server, prompt="The stop test", max_tokens=40, temperature=0, stop=[stop, "never appears"])
    assert whole.choices[0].text == cut
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage.completion_tokens < 40
    text, finish, usage, _ = stream_completion(server, prompt="The stop test", max_tokens=40, temperature=0,
                                               stop=stop, stream_options={"include_usage": True})
    assert (text, finish) == (cut, "stop")
    assert usage.completion_tokens == whole.usage.completion_tokens


def test_seeded_sampling_is_reproducible(server):
    kw = dict(prompt="seeded", max_tokens=16, temperature=1.0, top_p=0.95, extra_body={"top_k": 100})
    a = complete(server, seed=7, **kw).choices[0].text
    b = complete(server, seed=7, **kw).choices[0].text
    c = complete(server, seed=8, **kw).choices[0].text
    assert a == b and a != c


def test_chat_whole_and_streamed(server):
    c = client(server)
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}]
    whole = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0)
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    n_prompt = whole.usage.prompt_tokens
    streamed, roles, finish, usage = "", [], None, None
    for ch in c.chat.completions.create(model="tiny", messages=msgs, max_tokens=10, temperature=0, stream=True,
                                        stream_options={"include_usage": True}):
        if ch.usage is not None:
            usage = ch.usage
        for choice in ch.choices:
            assert ch.object == "chat.completion.chunk"
            roles.append(choice.delta.role)
            streamed += (choice.delta.content or "") + (getattr(choice.delta, "reasoning_content", None) or "")
            finish = choice.finish_reason or finish
    assert roles[0] == "assistant"
    whole_msg = whole.choices[0].message
    assert streamed == (whole_msg.content or "") + (getattr(whole_msg, "reasoning_content", None) or "")
    assert finish == whole.choices[0].finish_reason
    assert (usage.prompt_tokens, usage.completion_tokens) == (n_prompt, whole.usage.completion_tokens)
    assert usage.total_tokens == n_prompt + usage.completion_tokens


def test_chat_tools_reach_the_template(server):
    c = client(server)
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    plain = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, temperature=0)
    with_tools = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, temperature=0, tools=tools)
    none = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, temperature=0, tools=tools,
                                     tool_choice="none")
    # The declaration adds its tokens to the prompt; tool_choice "none" declares nothing.
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + len(json.dumps(tools)) // 2
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens
    # A conversation with an earlier tool call and its result renders too.
    history = msgs + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"}]
    r = c.chat.completions.create(model="tiny", messages=history, max_tokens=2, temperature=0, tools=tools)
    assert r.usage.prompt_tokens > with_tools.usage.prompt_tokens


def test_metrics_add_up(server):
    before = metrics(server)
    usages, finishes = [], []
    for i in range(5):
        r = complete(server, prompt="count " * (i + 1), max_tokens=3 + i, temperature=0)
        usages.append(r.usage)
        finishes.append(r.choices[0].finish_reason)
    after = metrics(server)
    d = {k: after[k] - before.get(k, 0) for k in after}
    assert d["kimi_prompt_tokens_total"] == sum(u.prompt_tokens for u in usages)
    assert d["kimi_generation_tokens_total"] == sum(u.completion_tokens for u in usages)
    assert d["kimi_time_to_first_token_seconds_count"] == 5
    assert d["kimi_inter_token_latency_seconds_count"] == sum(u.completion_tokens for u in usages) - 5
    for reason in ("length", "stop"):  # a stop token ([EOS], <|im_end|>) may end a greedy run early
        assert d[f'kimi_requests_total{{finish_reason="{reason}"}}'] == finishes.count(reason)
    assert after["kimi_requests_running"] == 0 and after["kimi_requests_waiting"] == 0
    assert after["kimi_cache_slots_used"] == 0 and after["kimi_cache_slots_total"] == 8
    for h in ("kimi_time_to_first_token_seconds", "kimi_inter_token_latency_seconds"):
        buckets = [v for k, v in after.items() if k.startswith(h + "_bucket")]
        assert buckets == sorted(buckets) and buckets[-1] == after[h + "_count"]
        assert after[h + "_sum"] > 0
    # Every request of this module's server got a first token and has ended.
    total = sum(v for k, v in after.items() if k.startswith("kimi_requests_total"))
    assert total == after["kimi_time_to_first_token_seconds_count"]
