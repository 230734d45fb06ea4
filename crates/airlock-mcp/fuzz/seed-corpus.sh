#!/usr/bin/env bash
# Seeds corpus/endpoint_request with the JSON-RPC bodies the crate's tests send, under each
# Content-Type admission distinguishes, plus a few shapes the tests build at run time.
set -euo pipefail
cd "$(dirname "$0")"
out=corpus/endpoint_request
mkdir -p "$out"
bodies=$(mktemp)
trap 'rm -f "$bodies"' EXIT
# Raw-string bodies in the tests; format strings keep their `{name}` holes once `{{` is undone.
grep -rhoE 'r#"\{"jsonrpc"[^#]*"#' ../tests ../src | sed -E 's/^r#"//; s/"#$//; /\{\{/ { s/\{\{/{/g; s/\}\}/}/g; }' > "$bodies"
cat >> "$bodies" <<'JSON'
{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"deploy","arguments":{"env":"prod"},"_meta":{"io.airlock/call-key":"k1","progressToken":1}}}
{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deploy","arguments":{},"task":{"ttl":60000}}}
{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-1"}}
{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":7}}
{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":[1]}}
{"jsonrpc":"2.0","id":9,"result":{}}
{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"m"}}
[{"jsonrpc":"2.0","id":1,"method":"ping"}]
{"jsonrpc":"1.0","id":1,"method":"ping"}
JSON
n=0
while IFS= read -r body; do
  for type in 'application/json' 'Application/JSON; charset=utf-8' 'text/plain' ''; do
    n=$((n + 1))
    printf '%s\n%s' "$type" "$body" > "$out/seed$n"
  done
done < "$bodies"
echo "$n seeds in $out"
