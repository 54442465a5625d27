#!/usr/bin/env bash
# tests/runtime/cli_credentials_test.sh LEASEPROOF: how `leaseproof control`
# picks credentials and endpoints, before any request is sent (no server:
# the endpoints named here refuse connections or are never reached).
#   - a profile named by AWS_PROFILE that holds no keys is an error (exit 2),
#     never the local placeholder;
#   - an AWS host with no credentials found is an error, never the placeholder;
#   - `control create-queue` takes --profile (and signs with it);
#   - a region that cannot name a host is refused (exit 2) naming --region;
#   - FIPS and dual-stack hosts, a bad true/false setting and a profile's
#     services (refused), --profile replacing the environment's keys.
set -uo pipefail
binary=${1:?usage: cli_credentials_test.sh LEASEPROOF}
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
mkdir -p "$home/.aws"
printf '[profile regional]\nregion = eu-west-1\n' >"$home/.aws/config"
printf '[queues]\naws_access_key_id = AKIDQUEUES\naws_secret_access_key = s\n' >"$home/.aws/credentials"
failures=0

# expect NAME STATUS PATTERN -- COMMAND...: runs COMMAND in a clean environment.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local output status
  output=$(env -i PATH="$PATH" HOME="$home" AWS_EC2_METADATA_DISABLED=true "$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -qE -- "$pattern" <<<"$output"; then
    echo "FAIL $name: exit $status (expected $want), output not matching '$pattern':" >&2
    echo "$output" >&2
    failures=$((failures + 1))
  else
    echo "PASS $name: exit $status: $(grep -E -- "$pattern" <<<"$output" | head -n 1)"
  fi
}

expect "AWS_PROFILE without keys" 2 "credentials: no AWS credentials found" -- \
  env AWS_PROFILE=regional "$binary" control owners --endpoint http://127.0.0.1:1
expect "an AWS host without credentials" 2 "credentials: no AWS credentials found" -- \
  "$binary" control owners --region eu-west-1
expect "the region's endpoint" 2 "dynamodb endpoint https://dynamodb.eu-west-1.amazonaws.com \(from region eu-west-1\)" -- \
  "$binary" control owners --region eu-west-1
expect "create-queue --profile" 1 "credentials from profile 'queues'" -- \
  "$binary" control create-queue --profile queues --sqs-endpoint http://127.0.0.1:1 --queue releases.fifo
expect "a region that is no host's" 2 "--region: region 'eu-west-1.example' is not a region's name" -- \
  "$binary" control owners --region eu-west-1.example
expect "AWS_ENDPOINT_URL_DYNAMODB" 1 "dynamodb endpoint http://127.0.0.1:1 \(from AWS_ENDPOINT_URL_DYNAMODB\)" -- \
  env AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1 "$binary" control owners
expect "an endpoint that is not http" 2 "AWS_ENDPOINT_URL: 'ftp://127.0.0.1:1' is not an http:// or https:// URL" -- \
  env AWS_ENDPOINT_URL=ftp://127.0.0.1:1 "$binary" control owners
# As botocore reads them: FIPS and dual-stack hosts, a true/false setting
# with another value, a profile's services section (refused), and an
# explicit --profile replacing the environment's keys.
printf '[profile sectioned]\nservices = local\n[services local]\ndynamodb =\n  endpoint_url = http://127.0.0.1:1\n' \
  >>"$home/.aws/config"
expect "AWS_USE_FIPS_ENDPOINT" 2 "dynamodb endpoint https://dynamodb-fips.eu-west-1.amazonaws.com \(from region eu-west-1, FIPS\)" -- \
  env AWS_USE_FIPS_ENDPOINT=true "$binary" control owners --region eu-west-1
expect "AWS_USE_DUALSTACK_ENDPOINT" 2 "sqs endpoint https://sqs.eu-west-1.api.aws \(from region eu-west-1, dual-stack\)" -- \
  env AWS_USE_DUALSTACK_ENDPOINT=true "$binary" control create-queue --region eu-west-1 --queue releases.fifo
expect "a true/false setting with another value" 2 "dynamodb endpoint: AWS_USE_FIPS_ENDPOINT: 'maybe' is not true or false" -- \
  env AWS_USE_FIPS_ENDPOINT=maybe "$binary" control owners --region eu-west-1
expect "a profile's services" 2 "services = local in profile 'sectioned'.*AWS_ENDPOINT_URL_DYNAMODB" -- \
  env AWS_PROFILE=sectioned "$binary" control owners
expect "--profile replaces the environment's keys" 1 "credentials from profile 'queues'" -- \
  env AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=s "$binary" control owners --profile queues --endpoint http://127.0.0.1:1

if ((failures > 0)); then
  echo "cli_credentials: $failures failed" >&2
  exit 1
fi
echo "cli_credentials: all passed"
