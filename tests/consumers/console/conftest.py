"""One console world per session: the demo's data, a hostile capture and a 200 KB one ingested beside
it, tokens for a counterparty and a regulator, a real OpenID provider (:mod:`idp`) the console signs in
at, a real ``blackbox serve`` subprocess, and Debian's chromium driven by Playwright (never a downloaded
browser). Screenshots go to ``test-output/console/``
(gitignored) for a person to look at."""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from big import big_capture
from console_world import (
    CHROMIUM_ARGS,
    SHOTS,
    ConsoleWorld,
    clean_env,
    ids_of_user,
    run,
    serving,
    token,
)
from hostile import hostile_capture
from idp import CLIENT_ID, CLIENT_SECRET, running_idp


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleWorld]:
    root = tmp_path_factory.mktemp("console")
    data_dir = root / "demo"
    env = {**clean_env(), "BLACKBOX_DATA_DIR": str(data_dir)}
    demo = run(["demo", "--dir", str(data_dir), "--decisions", "300", "--days", "4"], env).stdout
    link = re.search(r"http://127\.0\.0\.1:8700/console/signin/link\?code=\S+", demo)
    assert link, demo[-2000:]
    failed_id = re.search(r"blackbox show (\S+)", demo)
    assert failed_id, demo[-2000:]
    shown = json.loads(run(["show", failed_id.group(1), "--json"], env).stdout)
    base: dict[str, Any] = shown["capture"]
    # the capture signs only a salted commitment to its user (DESIGN 16): the demo's raw id is usr_<customer>
    user = f"usr_{base['input']['requestPayload']['customer_id'][4:]}"
    base["input"]["originUserId"] = user

    signing = {**env, "BLACKBOX_SIGNING_KEY": (data_dir / "signing-key.path").read_text().strip()}
    hostile_id, big_id = "dec_01HOSTILE0000000000000001", "dec_01BIGCONTEXT00000000000001"
    for decision_id, capture in (
        (hostile_id, hostile_capture(base, decision_id=hostile_id)),
        (big_id, big_capture(base, decision_id=big_id)),
    ):
        path = root / f"{decision_id}.json"
        path.write_text(json.dumps(capture), encoding="utf-8")
        run(["capture", str(path)], signing)
    run(["consume", "--drain"], env)

    counterparty = token(env, "--caller", "acme-counterparty", "--scope", "counterparty", "--subject", user)
    regulator = token(env, "--caller", "eu-regulator", "--scope", "regulator")
    log_key = run(["log", "key"], env).stdout.strip().splitlines()[-1].strip()
    counterparty_ids = ids_of_user(data_dir, user)

    # the README's OIDC sign-in: an issuer and the console's client at it (its secret: a confidential client)
    with (
        running_idp() as idp,
        serving(
            {
                **env,
                "BLACKBOX_OIDC_ISSUER": idp.url,
                "BLACKBOX_OIDC_CLIENT_ID": CLIENT_ID,
                "BLACKBOX_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            },
            root / "serve.log",
        ) as url,
    ):
        yield ConsoleWorld(
            url=url,
            data_dir=data_dir,
            env=env,
            link=link.group(0).replace("http://127.0.0.1:8700", url),
            failed_id=failed_id.group(1),
            hostile_id=hostile_id,
            big_id=big_id,
            counterparty_token=counterparty,
            counterparty_ids=counterparty_ids,
            regulator_token=regulator,
            log_key=log_key,
            user=user,
            idp=idp,
        )


def launch_chromium(playwright: Any) -> Any:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.fail("chromium is missing: deploy/local/test.sh installs Debian's chromium package")
    return playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)


# Module scope, not session: Playwright's sync API keeps an event loop running on this thread while
# it is open, and every later test that calls asyncio.run (the async SDK integrations) would fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        launched = launch_chromium(p)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def operator_state(world: ConsoleWorld) -> dict[str, Any]:
    """Signed in once with the demo's one-time link (it is good once); every operator test in every
    module starts from this session. Its own Playwright runs in a thread of its own, so no event loop
    outlives it on the test thread."""
    from playwright.sync_api import sync_playwright

    outcome: dict[str, Any] = {}

    def sign_in() -> None:
        try:
            with sync_playwright() as p:
                launched = launch_chromium(p)
                context = launched.new_context()
                page = context.new_page()
                page.goto(world.link)
                page.click("#use-link")
                page.wait_for_url(f"{world.console}/decisions")
                outcome["state"] = context.storage_state()
                context.close()
                launched.close()
        except BaseException as e:  # reported on the test thread below
            outcome["error"] = e

    thread = threading.Thread(target=sign_in, name="console-sign-in")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    state: dict[str, Any] = outcome["state"]
    return state
