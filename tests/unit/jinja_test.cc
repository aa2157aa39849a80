// The Jinja interpreter (template/jinja.h) on the constructs chat templates
// in the wild use: snippets modelled on Llama 3.1/3.2, Qwen2.5/3, Mistral
// Nemo, Phi-3.5, Gemma 2, SmolLM3 and gpt-oss templates, and one case per
// statement, expression, filter, test and method. Each expected text is what
// Python's Jinja2 3.1 renders with Hugging Face's apply_chat_template
// environment (trim_blocks, lstrip_blocks, loop controls, tojson as
// json.dumps); a case with `raises` must fail with that message.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "core/error_reason.h"
#include "template/jinja.h"

namespace zl::tmpl {
namespace {

constexpr const char* kMessages = R"J([{"role":"system","content":"Be brief."},{"role":"user","content":" Hi there "},{"role":"assistant","content":"<think>\nhmm\n</think>\n\nHello!"},{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"abc123def","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","tool_call_id":"abc123def","content":"18C"}])J";
constexpr const char* kTools = R"J([{"type":"function","function":{"name":"get_weather","description":"Weather now.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"]}}}])J";

struct Case {
  const char* name;
  const char* source;
  const char* context;  // JSON object added to the common context
  const char* expected; // null: the render raises
  const char* raises;
};

const Case kCases[] = {
    {"llama31_system_head",
     R"J({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- set first_user_message = messages[0]['content']|trim %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if 'tool_calls' in message %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
)J",
     R"J({"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]})J",
     R"J(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Tools: brave_search, wolfram_alpha

Today Date: 26 Jul 2024

Be brief.<|eot_id|>{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": "City"
                },
                "unit": {
                    "type": "string",
                    "enum": [
                        "c",
                        "f"
                    ]
                }
            },
            "required": [
                "city"
            ]
        }
    }
}

Hi there<|eot_id|>{"name": "get_weather", "parameters": {"city": "Paris"}}"18C")J",
     nullptr},
    {"llama32_strftime",
     R"J({%- if strftime_now is defined %}{{ 'has' }}{% endif %}{{ 'x' if strftime_now is not defined else 'y' }})J",
     R"J({})J",
     R"J(hasy)J",
     nullptr},
    {"qwen25_tools",
     R"J({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools><|im_end|>\n" }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)J",
     R"J({})J",
     R"J(<|im_start|>system
Be brief.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Weather now.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}
</tools><|im_end|>
<|im_start|>user
 Hi there <|im_end|>
<|im_start|>assistant
<think>
hmm
</think>

Hello!<|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
18C
</tool_response><|im_end|>
<|im_start|>assistant
)J",
     nullptr},
    {"qwen3_last_query",
     R"J({%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{{- ns.last_query_index }}|
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {{- '[' ~ reasoning_content.strip('\n') ~ '][' ~ content ~ ']' }}
    {%- endif %}
{%- endfor %}
{%- if enable_thinking is defined and enable_thinking is false %}
    {{- '<think>\n\n</think>\n\n' }}
{%- endif %})J",
     R"J({"enable_thinking": false})J",
     R"J(3|[hmm][Hello!][][]<think>

</think>

)J",
     nullptr},
    {"mistral_nemo",
     R"J({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}
{%- for message in loop_messages | rejectattr("role", "equalto", "tool") | rejectattr("role", "equalto", "tool_results") | selectattr("tool_calls", "undefined") %}
    {%- if (message["role"] == "user") != (loop.index0 % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS][" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST]" + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif (message.tool_calls is defined and message.tool_calls is not none) %}
        {{- "[TOOL_CALLS][" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS]{"content": ' + content|string + ", " }}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %})J",
     R"J({})J",
     R"J(<s>[INST] Hi there [/INST]<think>
hmm
</think>

Hello!</s>[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather", "description": "Weather now.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}][/AVAILABLE_TOOLS][INST]Weather in Paris?[/INST][TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]</s>[TOOL_RESULTS]{"content": 18C, "call_id": "abc123def"}[/TOOL_RESULTS])J",
     nullptr},
    {"mistral_raise",
     R"J({%- for m in messages %}{%- if m.tool_calls is defined %}{%- for t in m.tool_calls %}{%- if t.id|length != 10 %}{{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}{%- endif %}{%- endfor %}{%- endif %}{%- endfor %})J",
     R"J({})J",
     nullptr,
     R"J(Tool call IDs should be alphanumeric strings with length 9!)J"},
    {"phi35",
     R"J({% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})J",
     R"J({})J",
     R"J(<|system|>
Be brief.<|end|>
<|user|>
 Hi there <|end|>
<|assistant|>
<think>
hmm
</think>

Hello!<|end|>
<|user|>
Weather in Paris?<|end|>
<|assistant|>
<|end|>
<|assistant|>
)J",
     nullptr},
    {"gemma2",
     R"J({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})J",
     R"J({})J",
     nullptr,
     R"J(System role not supported)J"},
    {"gemma2_ok",
     R"J({{ bos_token }}{% for message in messages[1:3] %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})J",
     R"J({})J",
     R"J(<s><start_of_turn>user
Hi there<end_of_turn>
<start_of_turn>model
<think>
hmm
</think>

Hello!<end_of_turn>
<start_of_turn>model
)J",
     nullptr},
    {"smollm3",
     R"J({%- set ns = namespace(enable_thinking=true) -%}
{%- for message in messages -%}
  {%- set content = message.content if message.content is string else "" -%}
  {%- if message.role == "user" or message.role == "system" -%}
    {%- if "/no_think" in content -%}
      {%- set ns.enable_thinking = false -%}
    {%- elif "/think" in content -%}
      {%- set ns.enable_thinking = true -%}
    {%- endif -%}
  {%- endif -%}
{%- endfor -%}
{%- set reasoning_mode = "/think" if ns.enable_thinking else "/no_think" -%}
{%- if messages[0].role == "system" -%}
  {%- set system_message = messages[0].content -%}
  {%- if "/system_override" in system_message -%}
    {{- custom_instructions.replace("/system_override", "").rstrip() -}}
  {%- else -%}
    {{- "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: " + reasoning_mode + "\n\n" -}}
    {%- set custom_instructions = system_message.replace("/no_think", "").replace("/think", "").rstrip() -%}
    {{- "## Custom Instructions\n\n" + custom_instructions + "\n\n" -}}
  {%- endif -%}
  {%- if xml_tools or python_tools or tools -%}
    {{- "### Tools\n\n" -}}
    {%- set ns.xml_tool_string = "" -%}
    {%- for tool in tools[:] -%}
      {%- set ns.xml_tool_string = ns.xml_tool_string ~ (tool | string) ~ "\n" -%}
    {%- endfor -%}
    {{- ns.xml_tool_string -}}
  {%- endif -%}
{%- endif -%}
{%- for message in messages -%}
  {%- if message.role == "assistant" -%}
    {% generation %}
    {{- "<|im_start|>assistant\n" + message.content.split("</think>")[-1].lstrip() + "<|im_end|>\n" -}}
    {% endgeneration %}
  {%- endif -%}
{%- endfor -%})J",
     R"J({"xml_tools": null, "python_tools": null})J",
     R"J(<|im_start|>system
## Metadata

Knowledge Cutoff Date: June 2025
Reasoning Mode: /think

## Custom Instructions

Be brief.

### Tools

{'type': 'function', 'function': {'name': 'get_weather', 'description': 'Weather now.', 'parameters': {'type': 'object', 'properties': {'city': {'type': 'string', 'description': 'City'}, 'unit': {'type': 'string', 'enum': ['c', 'f']}}, 'required': ['city']}}}
<|im_start|>assistant
Hello!<|im_end|>
<|im_start|>assistant
<|im_end|>
)J",
     nullptr},
    {"gptoss_macros",
     R"J({%- macro render_typescript_type(param_spec, required_params, is_nullable=false) -%}
    {%- if param_spec.type == "array" -%}
        {%- if param_spec['items'] -%}
            {%- if param_spec['items']['type'] == "string" -%}
                {{- "string[]" }}
            {%- else -%}
                {{- "any[]" }}
            {%- endif -%}
        {%- endif -%}
    {%- elif param_spec.enum -%}
        {{- '"' + param_spec.enum|join('" | "') + '"' }}
    {%- elif param_spec.type == "string" -%}
        {{- "string" }}
        {%- if param_spec.nullable -%}{{- " | null" }}{%- endif -%}
    {%- elif param_spec.oneOf -%}
        {%- for variant in param_spec.oneOf -%}
            {{- render_typescript_type(variant, required_params) -}}
            {%- if not loop.last %}{{- " | " }}{% endif -%}
        {%- endfor -%}
    {%- else -%}
        {{- "any" }}
    {%- endif -%}
{%- endmacro -%}
{%- macro render_tool_namespace(namespace_name, tools) -%}
    {{- "## " + namespace_name + "\n\n" }}
    {{- "namespace " + namespace_name + " {\n\n" }}
    {%- for tool in tools %}
        {%- set tool = tool.function %}
        {{- "// " + tool.description + "\n" }}
        {{- "type "+ tool.name + " = " }}
        {%- if tool.parameters and tool.parameters.properties %}
            {{- "(_: {\n" }}
            {%- for param_name, param_spec in tool.parameters.properties.items() %}
                {%- if param_spec.description %}
                    {{- "// " + param_spec.description + "\n" }}
                {%- endif %}
                {{- param_name }}
                {%- if param_name not in (tool.parameters.required or []) -%}
                    {{- "?" }}
                {%- endif -%}
                {{- ": " }}
                {{- render_typescript_type(param_spec, tool.parameters.required or []) }}
                {%- if not loop.last %}
                    {{- ",\n" }}
                {%- else %}
                    {{- ",\n" }}
                {%- endif -%}
            {%- endfor %}
            {{- "}) => any;\n\n" }}
        {%- else -%}
            {{- "() => any;\n\n" }}
        {%- endif -%}
    {%- endfor %}
    {{- "} // namespace " + namespace_name }}
{%- endmacro -%}
{{- render_tool_namespace("functions", tools) }}
{{- render_typescript_type({"oneOf": [{"type": "string", "nullable": true}, {"type": "array", "items": {"type": "number"}}]}, []) }}
{%- set last_tool_call = namespace(name=none) %}
{%- for message in messages -%}
  {%- if message.tool_calls is defined and message.tool_calls -%}
    {%- set last_tool_call.name = message.tool_calls[0].function.name %}
    {{- "<|start|>assistant to=functions." + last_tool_call.name + "<|channel|>commentary json<|message|>" + message.tool_calls[0].function.arguments|tojson + "<|call|>" }}
  {%- elif message.role == 'tool' -%}
    {{- "<|start|>functions." + last_tool_call.name + " to=assistant<|channel|>commentary<|message|>" + message.content|tojson + "<|end|>" }}
  {%- endif -%}
{%- endfor -%}
{{- "<|start|>assistant" if add_generation_prompt else "" }})J",
     R"J({})J",
     R"J(## functions

namespace functions {

// Weather now.
type get_weather = (_: {
// City
city: string,
unit?: "c" | "f",
}) => any;

} // namespace functionsstring | null | any[]<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"18C"<|end|><|start|>assistant)J",
     nullptr},
    {"call_block",
     R"J({% macro box(title) %}[{{ title }}:{{ caller() }}]{% endmacro %}{% call box("t") %}inner {{ 1 + 2 }}{% endcall %}{% call(x) box("u") %}{% endcall %})J",
     R"J({})J",
     R"J([t:inner 3][u:])J",
     nullptr},
    {"filter_block",
     R"J({% filter upper %}hello {{ "x" }}{% endfilter %}|{% set y %}  a b  {% endset %}{{ y | trim }}|{% raw %}{{ not evaluated }}{% endraw %})J",
     R"J({})J",
     R"J(HELLO X|a b|{{ not evaluated }})J",
     nullptr},
    {"whitespace",
     R"J(A
  {% if true %}
    B
  {% endif %}
  {{- " C " -}}
  D {# comment #}
E  {%+ if true %}F{% endif %}
{%- for i in range(3) %}
  {{ i }}
{% endfor %}
G)J",
     R"J({})J",
     R"J(A
    B
 C D E  F  0
  1
  2
G)J",
     nullptr},
    {"loop_vars",
     R"J({% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o','e') }};{% endfor %}{% for x in [] %}no{% else %}empty{% endfor %}{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.last }}{% endfor %}{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %})J",
     R"J({})J",
     R"J(103TrueFalse3bo;212FalseFalse3ace;321FalseTrue3bo;empty2False4True013)J",
     nullptr},
    {"expressions",
     R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ "a" ~ 1 ~ none }} {{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 'z' not in ['a'] }} {{ 1 if false }} {{ [1,2,3][1:] }} {{ "hello"[::-1] }} {{ "héllo"[1] }} {{ "héllo"|length }} {{ {'a': 1}['a'] }} {{ (1, 2)|list }} {{ 3.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ true and 'x' }} {{ '' or 'y' }} {{ not none }})J",
     R"J({})J",
     R"J(3 -4 1 2 3.5 1024 7 a1None True True True  [2, 3] olleh é 5 1 [1, 2] 3.0 1e+20 0.30000000000000004 x y True)J",
     nullptr},
    {"filters",
     R"J({{ [3,1,2]|sort|join(',') }} {{ ['b','A','c']|sort|join }} {{ [1,2,2,3,1]|unique|list }} {% for k, v in {'b':1,'a':2}|dictsort %}{{ k }}{{ v }}{% endfor %} {% for k, v in {'b':1,'A':2}|items %}{{ k }}{{ v }}{% endfor %} {{ 'x'|default('d') }} {{ undefined_var|default('d') }} {{ ''|default('e', true) }} {{ [1,2]|first }}{{ [1,2]|last }} {{ messages|map(attribute='role')|join('/') }} {{ messages|selectattr('role','equalto','user')|map(attribute='content')|list }} {{ messages|rejectattr('content')|list|length }} {{ 'a-b'|replace('-', '+') }} {{ 42|string ~ '!' }} {{ '12'|int + 1 }} {{ 'x'|int }} {{ 3.7|int }} {{ 'abc'|list }} {{ '  pad  '|trim }} {{ 'Hello World'|lower }}|{{ 'hello world'|title }}|{{ 'hello'|capitalize }} {{ [1,2,3]|sum }} {{ [1,5,3]|max }} {{ 'a
b'|indent(2, true) }} {{ [1,2,3]|reverse|list }} {{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ -3|abs }} {{ 2.567|round(2) }} {{ {'a': [1, {'b': none}], 'c': true}|tojson }} {{ {'a': [1, 2]}|tojson(indent=2) }} {{ 'é"
'|tojson }} {{ ['a', 1.5]|string }} {{ {'k': 'v'} }})J",
     R"J({})J",
     R"J(1,2,3 Abc [1, 2, 3] a2b1 b1A2 x d e 12 system/user/assistant/user/assistant/tool [' Hi there ', 'Weather in Paris?'] 1 a+b 42! 13 0 3 ['a', 'b', 'c'] pad hello world|Hello World|Hello 6 5   a
  b [3, 2, 1] [1, 3] [2, 4] 3 2.57 {"a": [1, {"b": null}], "c": true} {
  "a": [
    1,
    2
  ]
} "é\"\n" ['a', 1.5] {'k': 'v'})J",
     nullptr},
    {"methods",
     R"J({{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'a-b-c'.replace('-', '', 1) }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ 'abcb'.count('b') }}|{{ ', '.join(['x','y']) }}|{{ {'a':1}.get('a') }}|{{ {'a':1}.get('z', 'dflt') }}|{{ {'a':1}.get('z') }}|{{ {'a':1,'b':2}.keys()|list }}|{{ {'a':1,'b':2}.values()|list }}|{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}|{{ 'Hello {}!'.format('you') }}|{{ 'a
b'.splitlines() }}|{{ '12'.isdigit() }})J",
     R"J({})J",
     R"J(x|a|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|True|True|ABC|abc|ab-c|1|3|2|x, y|1|dflt|None|['a', 'b']|[1, 2]|x=1;y=2;|Hello you!|['a', 'b']|True)J",
     nullptr},
    {"tests",
     R"J({{ none is none }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is boolean }} {{ 'x' is string }} {{ [] is iterable }} {{ {} is mapping }} {{ [] is sequence }} {{ x is defined }} {{ x is undefined }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is in 'abc' }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'abc' is lower }} {{ messages[0] is mapping }} {{ raise_exception is callable }} {{ 'x' is not string }} {{ true is true }} {{ 0 is false }})J",
     R"J({})J",
     R"J(True True True True True True True True True False True True True True True True True True True True False True False)J",
     nullptr},
    {"namespace_scoping",
     R"J({% set ns = namespace(count=0, found=none) %}{% set outer = 'o' %}{% for m in messages %}{% set outer = 'inner' %}{% set ns.count = ns.count + 1 %}{% if m.role == 'tool' %}{% set ns.found = loop.index0 %}{% endif %}{% endfor %}{{ outer }} {{ ns.count }} {{ ns.found }}{% if true %}{% set z = 5 %}{% endif %}{{ z }})J",
     R"J({})J",
     R"J(o 6 55)J",
     nullptr},
    {"macro_defaults_kwargs",
     R"J({% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(greeting='Hi', name='C') }})J",
     R"J({})J",
     R"J(Hello, A! Hello, B? Hi, C!)J",
     nullptr},
    {"string_escapes",
     R"J({{ 'it\'s' }} {{ "tab\there" }} {{ '\u00e9' }} {{ "a" "b" }} {{ '\\n' }})J",
     R"J({})J",
     R"J(it's tab	here é ab \n)J",
     nullptr},
    {"slicing_negative",
     R"J({{ messages[-1].role }} {{ messages[1:-1]|length }} {{ messages[:2]|map(attribute='role')|join(',') }} {{ 'abcdef'[1:5:2] }} {{ [1,2,3,4,5][::-2] }} {{ 'abc'[-1] }})J",
     R"J({})J",
     R"J(tool 4 system,user bd [5, 3, 1] c)J",
     nullptr},
    {"dict_literal_and_in",
     R"J({% set d = {'role': 'user', "n": 3, 'nested': {'k': [1, 2]}} %}{{ 'role' in d }} {{ d.nested.k[1] }} {{ d['n'] * 2 }} {{ d|length }} {{ d|tojson }})J",
     R"J({})J",
     R"J(True 2 6 3 {"role": "user", "n": 3, "nested": {"k": [1, 2]}})J",
     nullptr},
};

Value context_for(const Case& c) {
  Dict d;
  d.set("messages", from_json(boost::json::parse(kMessages), true));
  d.set("tools", from_json(boost::json::parse(kTools), true));
  d.set("bos_token", Value("<s>"));
  d.set("eos_token", Value("</s>"));
  d.set("add_generation_prompt", Value(true));
  const Value extra = from_json(boost::json::parse(c.context), false);
  for (const auto& [k, v] : extra.dict().items) d.set(k, v);
  return Value(std::move(d));
}

class JinjaConstructs : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaConstructs, RendersAsJinja2) {
  const Case& c = GetParam();
  auto t = Template::parse(c.source, c.name);
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto r = t->render(context_for(c));
  if (c.expected) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->text(), c.expected);
  } else {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(r.status().reason(), ErrorReason::kInvalidPrompt);
    EXPECT_EQ(r.status().message(), c.raises);
  }
}

INSTANTIATE_TEST_SUITE_P(Snippets, JinjaConstructs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

Result<std::string> render(std::string_view source, const RenderLimits& limits = {}) {
  ASSIGN_OR_RETURN(Template t, Template::parse(source, "t.jinja"));
  ASSIGN_OR_RETURN(Rendered r, t.render(Value(Dict{}), limits));
  return r.text();
}

TEST(Jinja, SyntaxErrorsNameTheFileAndLine) {
  const struct {
    const char* source;
    const char* message;
  } kBad[] = {
      {"a\n{% if x %}\nb", "template t.jinja line 3: unexpected end of template, expected 'elif'"},
      {"{{ 1 + }}", "template t.jinja line 1: expected an expression, got '}}'"},
      {"x\n\n{% frobnicate %}", "template t.jinja line 3: unknown statement 'frobnicate'"},
      {"{{ 'abc }}", "template t.jinja line 1: unterminated string literal"},
      {"{% for x in y %}{% endif %}", "template t.jinja line 1: unexpected 'endif'"},
      {"{% break %}", "template t.jinja line 1: 'break' outside a loop"},
      {"{# open", "template t.jinja line 1: unterminated comment"},
  };
  for (const auto& b : kBad) {
    auto t = Template::parse(b.source, "t.jinja");
    ASSERT_FALSE(t.ok()) << b.source;
    EXPECT_EQ(t.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(t.status().message(), b.message) << b.source;
  }
}

TEST(Jinja, RuntimeErrorsAreTypedWithTheLine) {
  auto r = render("ok\n{{ 1 + 'a' }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), ErrorReason::kInvalidPrompt);
  EXPECT_EQ(r.status().message(), "t.jinja line 2: unsupported operand types for +: 'int' and 'str'");
  EXPECT_FALSE(render("{{ none.x() }}").ok());
  EXPECT_FALSE(render("{{ undefined_function() }}").ok());
  EXPECT_FALSE(render("{{ 1 // 0 }}").ok());
  EXPECT_FALSE(render("{{ x | nosuchfilter }}").ok());
  EXPECT_FALSE(render("{% for a, b in [1] %}{% endfor %}").ok());
  // Python's ValueError (an empty separator would split forever).
  auto empty_sep = render("{{ 'abc'.split('') }}");
  ASSERT_FALSE(empty_sep.ok());
  EXPECT_NE(empty_sep.status().message().find("empty separator"), std::string::npos);
  EXPECT_FALSE(render("{{ 'abc'.rsplit('') }}").ok());
}

TEST(Jinja, BoundsLoopsRecursionOutputAndTime) {
  auto loops = render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                      {.max_loop_iterations = 10000});
  ASSERT_FALSE(loops.ok());
  EXPECT_NE(loops.status().message().find("loop iterations"), std::string::npos);

  auto recursion = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(recursion.ok());
  EXPECT_NE(recursion.status().message().find("nested deeper"), std::string::npos);

  auto output = render("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", {.max_output_bytes = 1000});
  ASSERT_FALSE(output.ok());
  EXPECT_NE(output.status().message().find("larger than"), std::string::npos);

  auto slow = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                     {.max_loop_iterations = int64_t{1} << 40, .max_time = std::chrono::milliseconds(50)});
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("longer than"), std::string::npos);

  // Values nested without end, or a namespace inside itself: errors, not a crash or a leak.
  auto nested = render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("nested deeper"), std::string::npos) << nested.status().message();
  EXPECT_FALSE(render("{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns|tojson }}").ok());

  // Repetition is exact (Python's) or an error, never silently shortened.
  auto rep = render("{{ ('ab' * 3000000) | length }}|{{ '' * 1000000000000 }}|{{ 'x' * -2 }}|{{ ([] * 1000000000000) | length }}");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep.value(), "6000000|||0");
  EXPECT_FALSE(render("{{ 'a' * 100000000 }}").ok());

  // Deep nesting is a parse error, not a stack overflow.
  std::string deep(100000, '(');
  EXPECT_FALSE(render("{{ " + deep + " }}").ok());
  std::string ifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(render(ifs).ok());
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  auto r = render("{{ raise_exception('Conversation roles must alternate') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "Conversation roles must alternate");
  EXPECT_EQ(r.status().reason(), ErrorReason::kInvalidPrompt);
}

TEST(Jinja, StrftimeNowPrintsToday) {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  const std::string today(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm));
  auto r = render("{{ strftime_now('%Y-%m-%d') }}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, today);
}

TEST(Jinja, RequestTextStaysApartFromMarkup) {
  auto t = Template::parse("<|im_start|>{{ m.content }}<|im_end|>{{ m.content|trim }}{{ 'x' + m.content }}", "t");
  ASSERT_TRUE(t.ok());
  Dict m;
  m.set("content", Value(std::string(" <|im_end|> "), true));
  Dict ctx;
  ctx.set("m", Value(std::move(m)));
  auto r = t->render(Value(std::move(ctx)));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->parts.size(), 5u);
  EXPECT_FALSE(r->parts[0].from_input);
  EXPECT_TRUE(r->parts[1].from_input);
  EXPECT_EQ(r->parts[1].text, " <|im_end|> ");
  EXPECT_FALSE(r->parts[2].from_input);
  EXPECT_TRUE(r->parts[3].from_input);  // trimmed: still the request's text
  EXPECT_EQ(r->parts[3].text, "<|im_end|>");
  EXPECT_FALSE(r->parts[4].from_input);  // mixed with template text: markup
}

}  // namespace
}  // namespace zl::tmpl
