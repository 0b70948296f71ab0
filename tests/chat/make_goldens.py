#!/usr/bin/env python3
"""Goldens for hpctrain's chat template engine, rendered by the real transformers (apply_chat_template).

Writes, next to this script:
  templates/*.jinja     every chat template of the `trl` wheel's trl/chat_templates/ (Apache-2.0, see
                        templates/README.md), copied byte for byte, so the C++ tests need no Python;
  conversations.json    the conversations rendered (system turns, several assistant turns, Unicode, tool calls,
                        reasoning content, content as parts) and the tools / template kwargs given with them;
  render_goldens.json   per template, conversation and add_generation_prompt: the text transformers' tokenizer
                        .apply_chat_template(tokenize=False) renders, or the error the template raises, and the
                        {% generation %} spans (bytes of the text) transformers' render_jinja_template reports;
  snippets.json         small templates that exercise one construct each (whitespace control, scoping, filters,
                        tests, methods, tojson, errors), rendered by the same jinja2 environment.

strftime_now() renders a fixed instant (2025-01-02 03:04:05): transformers' module-level `datetime` is replaced.
Usage: /work/peers/bin/python tests/chat/make_goldens.py   (transformers 5.x, trl, jinja2 >= 3.1.6)
"""
import datetime as real_datetime
import json
import os
import shutil
import sys

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
import trl
from transformers import PreTrainedTokenizerFast
from tokenizers import Tokenizer, models

HERE = os.path.dirname(os.path.abspath(__file__))
NOW = real_datetime.datetime(2025, 1, 2, 3, 4, 5)


class FixedDatetime(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


ctu.datetime = FixedDatetime

SPECIAL_TOKENS = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "unk_token": "<|unk|>", "pad_token": "<|pad|>"}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            "days": {"type": "integer", "description": "Days ahead", "default": 0},
            "hourly": {"type": "boolean", "description": "Hourly forecast", "nullable": True},
            "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to return"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "number", "description": "First"}, "b": {"type": "number", "description": "Second"}},
            "required": ["a", "b"]}}},
]

CONVERSATIONS = {
    "single": {"messages": [{"role": "user", "content": "What does the word apple mean?"},
                            {"role": "assistant", "content": "A round fruit of a tree of the rose family."}]},
    "system_multi": {"messages": [
        {"role": "system", "content": "You are a concise dictionary."},
        {"role": "user", "content": "Define: cat"},
        {"role": "assistant", "content": "A small domesticated carnivorous mammal."},
        {"role": "user", "content": "And dog?"},
        {"role": "assistant", "content": "  A domesticated descendant of the wolf.\n"},
        {"role": "user", "content": "Thanks!"}]},
    "unicode": {"messages": [
        {"role": "user", "content": "Ünïcödé: naïve café, 日本語, emoji 😀👍🏽, RTL שלום, tab\there, \"quotes\" 'single' \\back"},
        {"role": "assistant", "content": "Größe ≠ size; Σ and ς; ﬁ ligature; zero\u200bwidth; line\nbreak\r\nCRLF"},
        {"role": "user", "content": "<b>markup</b> & {{ not a tag }} {% nor this %}"},
        {"role": "assistant", "content": "ok"}]},
    "tools": {"tools": True, "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Zürich and 2+3.5?"},
        {"role": "assistant", "content": "",
         "tool_calls": [
             {"type": "function", "function": {"name": "get_weather",
                                               "arguments": {"city": "Zürich", "unit": "celsius", "days": 2,
                                                             "hourly": False, "fields": ["temp", "wind"]}}},
             {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3.5}}}]},
        {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21.5, \"wind\": \"calm\"}"},
        {"role": "tool", "name": "add", "content": "5.5"},
        {"role": "assistant", "content": "It is 21.5 °C and calm; 2 + 3.5 = 5.5."}]},
    "single_tool_call": {"tools": True, "messages": [
        {"role": "user", "content": "Add 1 and 2"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]},
        {"role": "tool", "content": "3"},
        {"role": "assistant", "content": "1 + 2 = 3"}]},
    "reasoning": {"messages": [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "reasoning_content": "Check divisors up to 4: 2, 3 do not divide 17.",
         "content": "Yes, 17 is prime."},
        {"role": "user", "content": "And 21?"},
        {"role": "assistant", "reasoning_content": "21 = 3 * 7.", "content": "No: 21 = 3 × 7."}]},
    "parts": {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hi!"}]}]},
    "kwargs": {"kwargs": {"enable_thinking": False, "reasoning_effort": "low", "builtin_tools": ["python"],
                          "model_identity": "You are a test model."},
               "messages": [{"role": "system", "content": "System prompt."},
                            {"role": "user", "content": "Hi"},
                            {"role": "assistant", "content": "Hello."}]},
}


def make_tokenizer():
    """A minimal fast tokenizer whose special tokens are SPECIAL_TOKENS (rendering never tokenizes)."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    vocab.update({"a": len(vocab)})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **SPECIAL_TOKENS)


def byte_spans(text, spans):
    return [[len(text[:begin].encode()), len(text[:end].encode())] for begin, end in spans]


def render(tokenizer, template, conversation, add_generation_prompt):
    tools = TOOLS if conversation.get("tools") else None
    kwargs = conversation.get("kwargs", {})
    try:
        text = tokenizer.apply_chat_template(conversation["messages"], tools=tools, chat_template=template,
                                             add_generation_prompt=add_generation_prompt, tokenize=False, **kwargs)
    except Exception as error:  # the template refuses the conversation: hpctrain must refuse it too
        return {"error": f"{type(error).__name__}: {error}"}
    # The {% generation %} spans, as apply_chat_template(return_assistant_tokens_mask=True) computes them.
    messages = [ctu._normalize_chat_messages(conversation["messages"])]
    rendered, indices = ctu.render_jinja_template(messages, tools=tools, chat_template=template,
                                                  return_assistant_tokens_mask=True,
                                                  add_generation_prompt=add_generation_prompt,
                                                  **{**tokenizer.special_tokens_map, **kwargs})
    assert rendered[0] == text, "render_jinja_template and apply_chat_template disagree"
    return {"text": text, "generation": byte_spans(text, indices[0])}


SNIPPETS = [
    # whitespace control, trim_blocks and lstrip_blocks
    ("ws_trim", "a\n{% if true %}\nb\n{% endif %}\nc\n", {}),
    ("ws_lstrip", "x\n    {% if true %}\n    y\n    {% endif %}\nz", {}),
    ("ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c", {}),
    ("ws_var_minus", "a  {{- 'x' -}}  b {{ 'y' }} \n c", {}),
    ("ws_plus", "a\n  {%+ if true %}b{% endif +%}\nc", {}),
    ("ws_comment", "a\n  {# note #}\nb {#- x -#} c", {}),
    ("ws_lstrip_after_var", "{{ 'v' }}  {% if true %}x{% endif %}", {}),
    ("ws_unicode_space", "a\u00a0\u2003{%- if true %}b{% endif %}", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
    ("ws_trailing_newline", "text\n", {}),
    ("raw", "{% raw %}{{ not }} {% parsed %}{% endraw %}!", {}),
    # literals and printing
    ("print_values", "{{ 1 }} {{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 10 / 4 }} {{ 7 // 2 }} "
                     "{{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ true }} {{ none }} {{ 3 * 1.5 }}", {}),
    ("print_containers", "{{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ ('a', 1) }} {{ ('a',) }}", {}),
    ("print_repr_quotes", "{{ ['it\\'s', 'a\"b', 'x\\ny', 'both\\'\"', 'tab\\t', 'é😀', '\\x07'] }}", {}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\x41\\u00e9\\U0001F600\\101' }}|{{ \"q\\\"q\" }}|{{ 'keep \\d' }}", {}),
    ("undefined_prints_empty", "[{{ missing }}][{{ obj.missing }}][{{ obj['missing'] }}]", {"obj": {"a": 1}}),
    ("concat", "{{ 'a' ~ none ~ 1.5 ~ true ~ missing ~ [1] }}", {}),
    ("arith_mix", "{{ true + 1 }} {{ 3 - 1.5 }} {{ 'ab' * 3 }} {{ [1, 2] * 2 }} {{ [1] + [2, 3] }} {{ -(3) }} {{ 5 % 3 }} "
                  "{{ 5.5 % 2 }} {{ -5.5 // 2 }} {{ 2 ** 0.5 }}", {}),
    ("compare_chain", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} "
                      "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} "
                      "{{ none == none }} {{ missing == missing }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ not [] }} {{ '' or [] or 0 }} {{ 1 if false }}|"
              "{{ 'y' if 0 else 'n' }}", {}),
    # scoping
    ("scope_for_fresh", "{% for i in range(3) %}{% if i == 0 %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}", {}),
    ("scope_for_outer", "{% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("scope_macro_late", "{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}", {}),
    ("scope_macro_caller_loop", "{% macro m() %}[{{ z }}]{% endmacro %}{% for z in [1] %}{{ m() }}{% endfor %}", {}),
    ("scope_if_leaks", "{% if true %}{% set q = 4 %}{% endif %}{{ q }}", {}),
    ("scope_namespace", "{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}"
                        "{% set ns.b = ns.b + [i] %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns }}", {}),
    ("scope_with", "{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}", {}),
    ("set_block", "{% set x %}  inner {{ 1 + 1 }} {% endset %}[{{ x }}]{% set y | upper %}up{% endset %}{{ y }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ c }}{{ d }}", {}),
    # loops
    ("loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                  "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("loop_prev_next_cycle", "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-"
                             "{{ loop.cycle('a', 'b') }};{% endfor %}", {}),
    ("loop_filter_else", "{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}"
                         "{% for x in [] %}a{% else %}empty{% endfor %}", {}),
    ("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}"
                            "{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}"
                    "{{ loop.index }};{% endfor %}", {}),
    ("loop_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
     {"d": {"b": 1, "a": [2], "c": None}}),
    ("loop_changed", "{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}", {}),
    # macros and call blocks
    ("macro_args", "{% macro f(a, b=2, c=a) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, 3) }} "
                   "{{ f(1, c=9) }} {{ f(b=5, a=4) }}", {}),
    ("macro_varargs", "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, z=4) }}", {}),
    ("macro_missing_arg", "{% macro f(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ f(1) }}", {}),
    ("macro_recursive", "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}", {}),
    ("call_block", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}"
                   "{% call wrap('b') %}inner {{ 1 }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                        "{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}", {}),
    # filters
    ("f_trim_case", "[{{ '  x \\n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ 'hELLO wORLD'|capitalize }}]"
                    "[{{ 'a-b c(d'|title }}][{{ 'MiXed'|lower }}{{ 'MiXed'|upper }}]", {}),
    ("f_length", "{{ 'héllo'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ missing|length }}", {}),
    ("f_join_map", "{{ [1, 2, 3]|join(', ') }} {{ xs|map(attribute='n')|join }} {{ ['a', 'b']|map('upper')|list }} "
                   "{{ xs|map(attribute='m', default='?')|join('-') }}", {"xs": [{"n": 1}, {"n": 2, "m": "y"}]}),
    ("f_select", "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} "
                 "{{ xs|selectattr('t', 'equalto', 'a')|list }} {{ xs|rejectattr('t')|list }} {{ [0, 1, '', 'x']|select|list }}",
     {"xs": [{"t": "a"}, {"t": "b"}, {"u": 1}]}),
    ("f_default", "{{ missing|default('d') }} {{ ''|default('e', true) }} {{ ''|d('f') }} {{ none|default('g') }} "
                  "{{ 0|default(1, boolean=true) }}", {}),
    ("f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} "
                     "[{{ []|first }}] {{ {'a': 1, 'b': 2}|first }}", {}),
    ("f_list_items", "{{ 'ab'|list }} {{ {'a': 1, 'b': 2}|items|list }} {{ {'b': 1, 'a': 2}|list }}", {}),
    ("f_dictsort", "{{ {'b': 1, 'A': 3, 'a': 2}|dictsort }} {{ {'b': 1, 'A': 3, 'a': 2}|dictsort(true) }} "
                   "{{ {'x': 2, 'y': 1}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("f_sort_unique", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} "
                      "{{ [3, 1, 2]|sort(reverse=true) }} {{ xs|sort(attribute='n')|map(attribute='n')|list }} "
                      "{{ [1, 2, 2, 3, 1]|unique|list }} {{ ['a', 'A', 'b']|unique|list }}",
     {"xs": [{"n": 2}, {"n": 1}]}),
    ("f_numbers", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 4.7|int }} {{ '3'|float }} {{ 'x'|float }} "
                  "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} {{ 2.5|round(method='floor') }} "
                  "{{ -3|abs }} {{ [1, 2.5]|sum }} {{ [1, 2, 3]|min }} {{ [1, 2, 3]|max }} {{ ['b', 'A']|max }}", {}),
    ("f_replace_string", "{{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }} {{ 5|string }}"
                         "{{ [1]|string }} {{ 'x'|safe }} {{ '<a>&'|e }} {{ none|string }}", {}),
    ("f_indent", "[{{ 'a\\nb\\n\\nc'|indent }}][{{ 'a\\nb'|indent(2, true) }}][{{ 'a\\n\\nb'|indent('> ', blank=true) }}]", {}),
    ("f_batch_reverse", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }} {{ 'abc'|reverse }} "
                        "{{ [1, 2, 3]|reverse|list }}", {}),
    ("f_format_center", "{{ '%s-%s'|format('a', 1) }} [{{ 'ab'|center(7) }}] {{ 'one two  three'|wordcount }} "
                        "{{ '%s and %r' % ('x', 'y') }} {{ '%d%%' % 5 }}", {}),
    ("f_tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ d|tojson(ensure_ascii=true) }}\n"
                 "{{ d|tojson(separators=(',', ':')) }}\n{{ d|tojson(sort_keys=true) }}\n{{ 'é\\n\"'|tojson }}\n"
                 "{{ [1.0, 1e16, -0.0, 3]|tojson }}\n{{ {}|tojson(indent=2) }}{{ []|tojson(indent=2) }}",
     {"d": {"z": 1, "a": [1.5, None, True, "ü😀\u2028\u007f\t"], "m": {"k": {}}}}),
    # tests
    ("tests", "{{ missing is defined }}{{ missing is undefined }}{{ none is none }}{{ 'a' is string }}"
              "{{ 1 is number }}{{ true is number }}{{ 1.5 is float }}{{ true is integer }}{{ {} is mapping }}"
              "{{ [] is iterable }}{{ 'a' is iterable }}{{ missing is iterable }}{{ [] is sequence }}"
              "{{ {} is sequence }}{{ 1 is sequence }}{{ true is boolean }}{{ false is false }}{{ 1 is true }}"
              "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is in [1, 2] }}{{ 'a' is eq 'a' }}"
              "{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is callable }}"
              "{{ 'x'|safe is escaped }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ 1 is equalto 1 }}", {}),
    # methods
    ("str_methods", "{{ '  a b  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|"
                    "{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}"
                    "|{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'hello'.replace('l', 'L') }}|"
                    "{{ 'Hello World'.title() }}{{ 'hello'.capitalize() }}{{ 'aXb'.swapcase() }}|{{ 'héllo'.find('l') }}"
                    "{{ 'hello'.rfind('l') }}{{ 'banana'.count('an') }}|{{ '-'.join(['a', 'b']) }}|"
                    "{{ '{} and {}'.format(1, 'x') }}{{ '{0}{name}{0!r}'.format('p', name='n') }}|"
                    "{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}|"
                    "{{ 'prefix_x'.removeprefix('prefix_') }}", {}),
    ("dict_methods", "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} "
                     "{{ d.values()|list }} {{ d.items()|list }} {{ d.items is defined }}", {"d": {"a": 1, "b": "x"}}),
    ("subscripts", "{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[::2] }} {{ 'abcdef'[-2:] }} {{ xs[1:] }} "
                   "{{ xs[-1] }} {{ xs[:-1] }} {{ 'héllo'[1] }} {{ xs.0 }} {{ d.a }} {{ d['b'] }} [{{ xs[10] }}] "
                   "{{ messages[0]['content'] }}", {"xs": [1, 2, 3], "d": {"a": 1, "b": 2},
                                                      "messages": [{"role": "user", "content": "hi"}]}),
    ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1, b='x') }} {{ strftime_now('%Y-%m-%d %H:%M') }}"
                " {{ namespace(x=1).x }}", {}),
    ("markup_plus", "{{ ('<b>'|safe) + '<i>' }} {{ '<i>' + ('<b>'|safe) }} {{ ('<b>'|safe) ~ '<i>' }}", {}),
    ("generation_spans", "a{% generation %}b{{ 'c' }}{% endgeneration %}d{% for i in range(2) %}"
                         "{% generation %}[{{ i }}]{% endgeneration %}{% endfor %}é{% generation %}ü{% endgeneration %}",
     {}),
    # errors: the engine must fail too
    ("err_raise", "{{ raise_exception('Custom message ' ~ 1) }}", {}),
    ("err_undefined_attr", "{{ obj.missing.deeper }}", {"obj": {}}),
    ("err_undefined_var_attr", "{{ nothing.attr }}", {}),
    ("err_type_add", "{{ 1 + 'a' }}", {}),
    ("err_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("err_len_none", "{{ none|length }}", {}),
    ("err_list_append", "{% set xs = [] %}{{ xs.append(1) }}", {}),
    ("err_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
    ("err_unknown_filter", "{{ 1|nosuchfilter }}", {}),
    ("err_unknown_test", "{{ 1 is nosuchtest }}", {}),
    ("err_syntax", "{% if %}", {}),
    ("err_unclosed", "{% for x in [1] %}", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_zero_division", "{{ 1 / 0 }}", {}),
    ("err_in_none", "{{ 'a' in none }}", {}),
    ("err_namespace_underscore", "{% set ns = namespace(_x=1) %}", {}),
    ("err_tojson_undefined", "{{ missing|tojson }}", {}),
    ("err_range_too_big", "{{ range(1000000)|length }}", {}),
    ("err_macro_too_many", "{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", {}),
]


def render_snippet(source, variables):
    try:
        compiled = ctu._compile_jinja_template(source)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    try:
        rendered_blocks, indices = [], []
        with compiled.environment.activate_tracker(rendered_blocks, indices):
            for block in compiled.generate(**variables):
                rendered_blocks.append(block)
        text = "".join(rendered_blocks)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return {"text": text, "generation": byte_spans(text, indices)}


def main():
    source_dir = os.path.join(os.path.dirname(trl.__file__), "chat_templates")
    templates_dir = os.path.join(HERE, "templates")
    os.makedirs(templates_dir, exist_ok=True)
    names = sorted(f for f in os.listdir(source_dir) if f.endswith(".jinja"))
    for name in names:
        shutil.copyfile(os.path.join(source_dir, name), os.path.join(templates_dir, name))
    tokenizer = make_tokenizer()
    goldens = []
    for name in names:
        with open(os.path.join(templates_dir, name), encoding="utf-8") as f:
            template = f.read()
        for conversation_name, conversation in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                result = render(tokenizer, template, conversation, add_generation_prompt)
                goldens.append({"template": name, "conversation": conversation_name,
                                "add_generation_prompt": add_generation_prompt, **result})
    conversations = {"special_tokens": tokenizer.special_tokens_map, "tools": TOOLS,
                     "now": NOW.strftime("%Y-%m-%d %H:%M:%S"), "conversations": CONVERSATIONS}
    snippets = [{"name": name, "template": source, "variables": variables, **render_snippet(source, variables)}
                for name, source, variables in SNIPPETS]
    generated_by = {"transformers": transformers.__version__, "trl": trl.__version__, "jinja2": jinja2.__version__,
                    "python": sys.version.split()[0]}
    for file, content in (("conversations.json", conversations), ("render_goldens.json", goldens),
                          ("snippets.json", snippets)):
        with open(os.path.join(HERE, file), "w", encoding="utf-8") as f:
            json.dump({"generated_by": generated_by, "cases": content} if file != "conversations.json" else
                      {"generated_by": generated_by, **content}, f, ensure_ascii=False, indent=1)
            f.write("\n")
    errors = sum("error" in g for g in goldens)
    print(f"make_goldens: {len(names)} templates, {len(goldens)} renders ({errors} refused by the template), "
          f"{len(snippets)} snippets")


if __name__ == "__main__":
    main()
