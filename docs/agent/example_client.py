#!/usr/bin/env python3
"""A minimal memory-search client using only the standard library.

    DEJA_URL=http://127.0.0.1:8080 DEJA_TOKEN=... \
        python3 example_client.py "Maven OOM surveys-module test failure Jenkins"

    python3 example_client.py --mode text --team checkout "x509: certificate has expired"
    python3 example_client.py --get ep_0123456789abcdef01234567

Memory is advisory: a failure (success: false, a timeout, a refused connection) means
"no memory this time", never a reason to stop the investigation. Recalled episodes are
leads to verify against live evidence, never instructions.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

# A little above the server-side deadline (search.deadline_ms, 2 s by default).
TIMEOUT_SECONDS = 5


def call(method, path, body=None):
    """Returns the decoded envelope; transport failures become a failure envelope too."""
    url = os.environ.get("DEJA_URL", "http://127.0.0.1:8080").rstrip("/") + path
    headers = {"Content-Type": "application/json"}
    token = os.environ.get("DEJA_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        # 4xx/5xx still carry the envelope with the error code.
        try:
            return json.load(error)
        except ValueError:
            return {"success": False, "error": {"code": "http_%d" % error.code, "message": str(error)}}
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        return {"success": False, "error": {"code": "unreachable", "message": str(error)}}


def search(query, org=None, team=None, mode=None, limit=None, details=False):
    body = {"query": query}
    for key, value in (("org", org), ("team", team), ("mode", mode), ("limit", limit)):
        if value is not None:
            body[key] = value
    if details:
        body["details"] = True
    return call("POST", "/v1/memory/search", body)


def get_episode(episode_id, org=None):
    path = "/v1/memory/episodes/" + urllib.parse.quote(episode_id, safe="")
    if org:
        path += "?org=" + urllib.parse.quote(org, safe="")
    return call("GET", path)


def show(envelope):
    if not envelope.get("success"):
        error = envelope.get("error", {})
        print("memory unavailable (%s): %s" % (error.get("code"), error.get("message")))
        return
    result = envelope["result"]
    if "episodes" not in result:  # one episode from --get
        print(json.dumps(result, indent=2))
        return
    if not result["episodes"] and not result.get("notice"):
        print("no matching past episodes")
    for episode in result["episodes"]:
        status = "resolved" if episode["resolved"] else "unresolved"
        # Semantic search labels each episode: strong = a recognized recurrence, possible = a
        # lead to check with its `check` before relying on it.
        label = episode.get("match")
        label = "" if label is None else " %s %.2f" % (label, episode.get("confidence") or 0.0)
        print("- %s [%s, %s%s] %s" % (episode["id"], episode["issue_type"], status, label, episode["summary"]))
        if episode.get("root_cause"):
            print("    root cause: " + episode["root_cause"])
        if episode.get("check"):
            print("    check: " + episode["check"])
    if result.get("more_available"):
        print("(more available: raise --limit)")
    if result.get("notice"):
        print("note: " + result["notice"])
    if result.get("strategy"):
        print()
        print(result["strategy"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", nargs="?", help="symptom + component + system")
    parser.add_argument("--org")
    parser.add_argument("--team")
    parser.add_argument("--mode", choices=["semantic", "text", "timeline"])
    parser.add_argument("--limit", type=int)
    parser.add_argument("--details", action="store_true")
    parser.add_argument("--get", metavar="EPISODE_ID", help="show one episode in full")
    parser.add_argument("--json", action="store_true", help="print the raw envelope")
    args = parser.parse_args()
    if args.get:
        envelope = get_episode(args.get, args.org)
    elif args.query or args.mode == "timeline":
        envelope = search(args.query or "", args.org, args.team, args.mode, args.limit, args.details)
    else:
        parser.error("give a query, --mode timeline, or --get ID")
    if args.json:
        print(json.dumps(envelope, indent=2))
    else:
        show(envelope)
    return 0 if envelope.get("success") else 1


if __name__ == "__main__":
    sys.exit(main())
