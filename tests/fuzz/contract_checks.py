"""Schemathesis checks of the WalletOps error contract, loaded with SCHEMATHESIS_HOOKS.

Every 4xx and 5xx answer carries the contract's error body {error, code, requestId} with a
contract code; the only server errors allowed are the contract's own: 502 PROVIDER_RPC_ERROR
or SEND_FAILED (a chain node or provider failed) and 503 SERVICE_UNAVAILABLE.
"""

import schemathesis

CODES = {
    "UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "RATE_LIMITED", "INVALID_INPUT",
    "IDEMPOTENT_BODY_MISMATCH", "IDEMPOTENT_REPLAY", "QUOTE_FAILED", "WALLET_NOT_FOUND",
    "USER_NOT_LINKED", "WALLET_NOT_DELEGATED", "WALLET_ID_REQUIRED", "CHAIN_UNKNOWN",
    "INSUFFICIENT_FUNDS", "PROVIDER_RPC_ERROR", "SEND_FAILED", "SERVICE_UNAVAILABLE",
    "INTERNAL_ERROR",
}
ALLOWED_SERVER_ERRORS = {
    (502, "PROVIDER_RPC_ERROR"),
    (502, "SEND_FAILED"),
    (503, "SERVICE_UNAVAILABLE"),
}


@schemathesis.check
def contract_error_body(ctx, response, case):
    status = response.status_code
    if status < 400:
        return None
    try:
        body = response.json()
    except Exception as error:
        raise AssertionError(f"{status} without a JSON error body: {error}")
    assert isinstance(body, dict), f"{status}: the error body is not an object: {body!r}"
    missing = {"error", "code", "requestId"} - set(body)
    assert not missing, f"{status}: the error body lacks {sorted(missing)}: {body!r}"
    assert body["code"] in CODES, f"{status}: {body['code']!r} is not a contract code"
    if status >= 500:
        assert (status, body["code"]) in ALLOWED_SERVER_ERRORS, f"server error {status}: {body!r}"
    return None
