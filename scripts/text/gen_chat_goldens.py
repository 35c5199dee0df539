#!/usr/bin/env python3
"""Golden prompts from the published Kimi chat templates for kimi.cpp's chat renderer (tests/test_chat_golden.cpp).

The templates are vendored data (tests/fixtures/text/chat/*.jinja; docs/text/chat.md gives their sources):
  kimi_k2.jinja  moonshotai/Kimi-K2-Thinking chat_template.jinja (Kimi-Linear / K2 message format)
  kimi_k3.jinja  the Kimi-K3 chat template (llama.cpp models/templates/Kimi-K3.jinja)
They are rendered with jinja2 the way transformers' apply_chat_template does: an ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension, transformers' `tojson` filter
(json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) with keyword arguments) and
raise_exception.

Each case is a kimi.cpp ChatRequest (messages with role, content, reasoning, tool_calls [{id, name, arguments}],
tool_call_id, name; tools_json; add_generation_prompt; thinking; thinking_effort), turned into the template's input
as an OpenAI-style server passes it: reasoning as reasoning_content, tool calls as {id, type, function: {name,
arguments}}, name and tool_call_id only when not empty, tools parsed from tools_json; K3 tool-call arguments that
are a JSON object are passed as that object (the template writes its members as argument blocks), others as the
string; K2's are always the string (its template writes a string as is). thinking_effort "" is left undefined.

  gen_chat_goldens.py --out tests/fixtures/text/chat      writes kimi_k2.json and kimi_k3.json
  gen_chat_goldens.py --check tests/fixtures/text/chat    renders again and compares with the committed files
                                                          (ctest: chat_goldens_fresh)
"""
import argparse
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

FORMATS = ("kimi_k2", "kimi_k3")


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def msg(role, content="", reasoning="", tool_calls=(), tool_call_id="", name=""):
    return {"role": role, "content": content, "reasoning": reasoning,
            "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in tool_calls],
            "tool_call_id": tool_call_id, "name": name}


WEATHER_TOOLS = json.dumps([
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather of a city (°C).",
        "parameters": {"type": "object", "required": ["city"],
                       "properties": {"city": {"type": "string", "description": "City name"},
                                      "Unit": {"type": "string", "enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
                                      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
], ensure_ascii=False)


def cases():
    """The conversations: (name, request) pairs; the request's fields default to ChatRequest's."""
    c = []
    c.append(("user_only", {"messages": [msg("user", "Hello!")]}))
    c.append(("system_no_generation_prompt", {"messages": [msg("system", "You are terse."), msg("user", "Hi")],
                                              "add_generation_prompt": False}))
    c.append(("empty_messages", {"messages": []}))
    c.append(("multi_turn", {"messages": [
        msg("system", "You are a helpful assistant."), msg("user", "What is 2+2?"), msg("assistant", "4."),
        msg("user", "And 3+3?\nAnswer briefly.")]}))
    c.append(("reasoning_in_history", {"messages": [
        msg("user", "Is 123 prime?"), msg("assistant", "No: 123 = 3 x 41.", reasoning="1+2+3 = 6, divisible by 3."),
        msg("user", "Weather in Paris?"),
        msg("assistant", "", reasoning="I should call the tool.",
            tool_calls=[("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]),
        msg("tool", '{"temp": 21}', tool_call_id="functions.get_weather:0", name="get_weather")],
        "tools_json": WEATHER_TOOLS}))
    c.append(("tools_calls_results", {"messages": [
        msg("user", "Weather in Paris and news about it?"),
        msg("assistant", "Checking both.", tool_calls=[
            ("functions.get_weather:0", "get_weather", '{"city":"Paris","Unit":"c"}'),
            ("functions.search:1", "search", '{"q": "Paris news", "limit": 3, "fresh": true, "site": null,'
                                             ' "score": 0.5, "tags": ["a", "b"], "opts": {"x": 1, "y": [1, 2]}}')]),
        msg("tool", "news: none", tool_call_id="functions.search:1", name="search"),
        msg("tool", "sunny, 21 °C", tool_call_id="functions.get_weather:0", name="get_weather"),
        msg("assistant", "Sunny and 21 °C; no news.", reasoning="Both results are in."),
        msg("user", "Thanks")], "tools_json": WEATHER_TOOLS}))
    c.append(("tool_results_unmatched", {"messages": [
        msg("user", "Run it"),
        msg("assistant", "", tool_calls=[("call_a", "search", '{"q":"x"}'), ("call_b", "get_weather", "")]),
        msg("tool", "first"), msg("tool", "second", tool_call_id="other", name="renamed")],
        "tools_json": WEATHER_TOOLS}))
    c.append(("names_and_special_text", {"messages": [
        msg("system", "Rules & \"quotes\"", name="ops"),
        msg("user", "Say <|im_end|> and <|open|>message<|sep|> literally: 日本語 ✓ 😀", name="alice \"A&B\""),
        msg("assistant", "OK: <|im_end|>", name="kimi")]}))
    c.append(("non_object_arguments", {"messages": [
        msg("user", "x"),
        msg("assistant", "", tool_calls=[("functions.search:0", "search", "[1, 2]"),
                                         ("functions.search:1", "search", "not json"),
                                         ("functions.search:2", "search", "  ")]),
        msg("tool", "r0", tool_call_id="functions.search:0"), msg("tool", "r1", tool_call_id="functions.search:1"),
        msg("tool", "r2", tool_call_id="functions.search:2")], "tools_json": WEATHER_TOOLS}))
    c.append(("thinking_off", {"messages": [
        msg("user", "Hi"), msg("assistant", "Hello", reasoning="greet"), msg("user", "Bye")],
        "thinking": False}))
    for effort in ("low", "medium", "high", "max"):
        c.append(("thinking_effort_" + effort, {"messages": [msg("user", "Think about it.")],
                                                "thinking_effort": effort}))
    c.append(("tools_empty_array", {"messages": [msg("user", "Hi")], "tools_json": "[]"}))
    c.append(("reasoning_blank_and_whitespace", {"messages": [
        msg("user", "a"), msg("assistant", " b ", reasoning=" \n "), msg("user", "c"),
        msg("assistant", "d", reasoning="  keep  ")], "add_generation_prompt": False}))
    c.append(("key_case_and_unicode_blank", {"messages": [
        msg("user", "é"),
        msg("assistant", "x", reasoning="\u3000\n\u00a0",
            tool_calls=[("functions.f:0", "f", '{"b": 1, "B": 2, "a": [true, null], "A": {"z": 1.5, "Y": "é"}}')]),
        msg("tool", "ok", tool_call_id="functions.f:0")],
        "tools_json": json.dumps([{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {
                "b": {"type": "integer"}, "B": {"type": "integer"}, "a": {"type": "array"},
                "A": {"type": "object"}, "_x": {"type": "string"}, "Z": {"type": "number", "minimum": -1.25e-7}}}}}],
            ensure_ascii=False)}))
    return c


def template_input(fmt, req):
    messages = []
    for m in req["messages"]:
        t = {"role": m["role"], "content": m["content"], "reasoning_content": m["reasoning"]}
        if m["name"]:
            t["name"] = m["name"]
        if m["tool_call_id"]:
            t["tool_call_id"] = m["tool_call_id"]
        elif fmt == "kimi_k2" and m["role"] == "tool":
            t["tool_call_id"] = ""
        if m["tool_calls"]:
            calls = []
            for call in m["tool_calls"]:
                args = call["arguments"]
                if fmt == "kimi_k3":
                    try:
                        parsed = json.loads(args)
                        if isinstance(parsed, dict):
                            args = parsed
                    except ValueError:
                        pass
                calls.append({"id": call["id"], "type": "function",
                              "function": {"name": call["name"], "arguments": args}})
            t["tool_calls"] = calls
        messages.append(t)
    kwargs = {"messages": messages, "add_generation_prompt": req.get("add_generation_prompt", True),
              "thinking": req.get("thinking", True),
              "tools": json.loads(req["tools_json"]) if req.get("tools_json") else None}
    if req.get("thinking_effort"):
        kwargs["thinking_effort"] = req["thinking_effort"]
    return kwargs


def render_all(fixture_dir):
    env = make_env()
    out = {}
    for fmt in FORMATS:
        with open(os.path.join(fixture_dir, fmt + ".jinja"), encoding="utf-8") as f:
            template = env.from_string(f.read())
        rows = []
        for name, req in cases():
            full = {"messages": req["messages"], "tools_json": req.get("tools_json", ""),
                    "add_generation_prompt": req.get("add_generation_prompt", True),
                    "thinking": req.get("thinking", True), "thinking_effort": req.get("thinking_effort", "")}
            rows.append({"name": name, "request": full, "text": template.render(**template_input(fmt, full))})
        out[fmt] = {"format": fmt, "template": fmt + ".jinja", "jinja2": jinja2.__version__, "cases": rows}
    return out


def dumps(doc):
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", help="fixture directory to write kimi_k2.json and kimi_k3.json into")
    g.add_argument("--check", help="fixture directory whose goldens are compared with a fresh rendering")
    args = ap.parse_args()
    fixture_dir = args.out or args.check
    docs = render_all(fixture_dir)
    bad = 0
    for fmt, doc in docs.items():
        path = os.path.join(fixture_dir, fmt + ".json")
        if args.out:
            with open(path, "w", encoding="utf-8") as f:
                f.write(dumps(doc))
            print(f"{path}: {len(doc['cases'])} cases")
            continue
        with open(path, encoding="utf-8") as f:
            committed = json.load(f)
        fresh = {c["name"]: c for c in doc["cases"]}
        old = {c["name"]: c for c in committed["cases"]}
        if fresh.keys() != old.keys():
            print(f"{path}: cases differ: {sorted(fresh.keys() ^ old.keys())}")
            bad += 1
        for name in sorted(fresh.keys() & old.keys()):
            if fresh[name] != old[name]:
                print(f"{path}: case {name}: the committed golden differs from jinja2's rendering")
                bad += 1
    if args.check:
        print("chat goldens: " + ("OK" if not bad else f"{bad} differences"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
