//! One exit-code rule for every command (README "Exit codes"): 0 success, 1 a runtime
//! failure, 2 a usage error — and a usage error's one sentence names the flag or
//! argument that was wrong. Every subcommand is walked with an unknown flag, a bad value
//! and a missing argument.

mod common;
use common::run;

const SUBCOMMANDS: &[&str] = &[
    "bar",
    "snapshot",
    "ps",
    "top",
    "runqlat",
    "writes",
    "daemon",
    "get",
    "eval",
    "put",
    "watch",
    "session",
    "init",
    "status",
    "doctor",
    "completions",
    "manpages",
];

fn usage_error(args: &[&str], names: &str) {
    let (code, _, err) = run(args);
    assert_eq!(code, Some(2), "{args:?}: exit {code:?}, stderr: {err}");
    assert!(
        err.contains(names),
        "{args:?}: the message should name {names:?}: {err}"
    );
    assert!(
        !err.contains("panicked"),
        "{args:?}: a usage error is a sentence, not a panic: {err}"
    );
}

#[test]
fn an_unknown_flag_is_a_usage_error_that_names_it() {
    for sub in SUBCOMMANDS {
        usage_error(&[sub, "--no-such-flag"], "--no-such-flag");
    }
    usage_error(&["--no-such-flag"], "--no-such-flag");
    usage_error(&["no-such-command"], "no-such-command");
}

#[test]
fn a_bad_value_is_a_usage_error_that_names_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["bar", "--interval", "soon"], "--interval"),
        (&["bar", "--format", "xml"], "--format"),
        (&["bar", "--warn", "cpu=lots"], "--warn"),
        (&["bar", "--text", "{no_such_field}"], "no_such_field"),
        (&["snapshot", "--interval", "soon"], "--interval"),
        (&["ps", "--sort", "nonsense"], "--sort"),
        (&["ps", "--fields", "pid,nonsense"], "nonsense"),
        (&["ps", "--pid", "one"], "--pid"),
        (&["ps", "--pid", "999999"], "--pid"),
        (&["ps", "--user", "no-such-user-here"], "--user"),
        (&["ps", "--comm", "(unclosed"], "--comm"),
        (&["top", "--sort", "nonsense"], "--sort"),
        (&["top", "-d", "soon"], "-d"),
        (&["runqlat", "-p", "999999", "1", "1"], "-p"),
        (&["runqlat", "--plot", "out.txt", "1", "1"], "--plot"),
        (&["runqlat", "--csv", "--json", "1", "1"], "--csv"),
        (&["writes", "-p", "999999", "1", "1"], "-p"),
        (&["writes", "--small-share", "2", "1", "1"], "--small-share"),
        (&["daemon", "--interval", "soon"], "--interval"),
        (&["daemon", "--metrics", "not-an-address"], "--metrics"),
        (&["get", "--format", "xml", "load.one"], "--format"),
        (&["eval", "{unclosed"], "template, byte 0"),
        (&["put", "var.x", "1", "--ttl", "soon"], "--ttl"),
        (&["watch", "--socket"], "--socket"),
        (&["init", "tcsh"], "tcsh"),
        (&["status", "--socket"], "--socket"),
        (&["doctor", "--json=yes"], "--json"),
        (&["completions", "tcsh"], "tcsh"),
        (&["session", "--socket"], "--socket"),
    ];
    for (args, names) in cases {
        usage_error(args, names);
    }
}

#[test]
fn a_missing_argument_is_a_usage_error_that_names_it() {
    let cases: &[(&[&str], &str)] = &[
        (&["get"], "<KEYS>"),
        (&["eval"], "<TEMPLATE>"),
        (&["put"], "<KEY>"),
        (&["put", "var.x"], "<VALUE>"),
        (&["watch"], "<KEY>"),
        (&["init"], "<SHELL>"),
        (&["completions"], "<SHELL>"),
        (&["manpages"], "<DIR>"),
        (&["bar", "--interval"], "--interval"),
        (&["ps", "--sort"], "--sort"),
        (&["runqlat", "-p"], "-p"),
        (&["daemon", "--socket"], "--socket"),
    ];
    for (args, names) in cases {
        usage_error(args, names);
    }
}

#[test]
fn a_key_without_a_value_here_is_1_and_success_is_0() {
    // A known key this machine has no value for (no battery in this VM, or a value of
    // none): 1; an unknown key is a usage error (2); a key with a value: 0.
    let (code, _, _) = run(&["get", "load.one"]);
    assert_eq!(code, Some(0));
    let (code, _, err) = run(&["get", "no.such.key"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no.such.key"), "{err}");
    let (code, _, _) = run(&["--version"]);
    assert_eq!(code, Some(0));
}
