//! Flags a binary accepts for compatibility with the program it replaces: declared once in a table,
//! added to the clap command, and after parsing either **ignored** (logged once, because they configure
//! something this binary does not have) or **refused** (a removed feature, with the replaced program's
//! own explanation and the usage exit code).
//!
//! An operator's existing `args:` and environment must not crash-loop a drop-in replacement: an unknown
//! flag is a usage error in clap, as in kong and kingpin. This module lets a binary say, flag by flag,
//! what it does with each of the other program's flags, and `--help` shows them under their own heading.

use clap::builder::BoolishValueParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// What the binary does with a compatibility flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Accepted and logged once as ignored, with the reason.
    Ignored(&'static str),
    /// Accepted and acted on by the binary itself (it reads the value from the matches).
    Applied,
    /// Refused with this message (a feature the replaced program removed, too).
    Refused(&'static str),
}

/// One flag of the replaced program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    /// Long name, without `--`.
    pub name: &'static str,
    /// Short form, if any.
    pub short: Option<char>,
    /// Other long names.
    pub aliases: &'static [&'static str],
    /// Environment variable, if any.
    pub env: Option<&'static str>,
    /// A boolean switch (`--x`, `--x=false`) rather than a flag with a value.
    pub switch: bool,
    /// Upstream's default, shown in `--help`.
    pub default: Option<&'static str>,
    /// What happens when it is given.
    pub effect: Effect,
    /// Hidden from `--help` (upstream hides it too).
    pub hidden: bool,
    /// May be given more than once (a list).
    pub repeatable: bool,
}

impl Flag {
    /// A flag with a value, ignored for `reason`.
    pub const fn ignored(name: &'static str, reason: &'static str) -> Self {
        Self {
            name,
            short: None,
            aliases: &[],
            env: None,
            switch: false,
            default: None,
            effect: Effect::Ignored(reason),
            hidden: false,
            repeatable: false,
        }
    }

    /// A boolean switch, ignored for `reason`.
    pub const fn ignored_switch(name: &'static str, reason: &'static str) -> Self {
        Self {
            switch: true,
            ..Self::ignored(name, reason)
        }
    }

    /// A hidden flag that is refused with `message`.
    pub const fn refused(name: &'static str, switch: bool, message: &'static str) -> Self {
        Self {
            switch,
            effect: Effect::Refused(message),
            hidden: true,
            ..Self::ignored(name, "")
        }
    }

    /// The same flag, applied by the binary instead of ignored.
    pub const fn applied(self) -> Self {
        Self {
            effect: Effect::Applied,
            ..self
        }
    }

    /// The same flag with a short form.
    pub const fn short(self, short: char) -> Self {
        Self {
            short: Some(short),
            ..self
        }
    }

    /// The same flag, which may be given more than once.
    pub const fn repeatable(self) -> Self {
        Self {
            repeatable: true,
            ..self
        }
    }

    /// The same flag with other long names.
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Self {
        Self { aliases, ..self }
    }

    /// The same flag, also read from `env`.
    pub const fn env(self, env: &'static str) -> Self {
        Self {
            env: Some(env),
            ..self
        }
    }

    /// The same flag with upstream's default shown in `--help`.
    pub const fn default(self, default: &'static str) -> Self {
        Self {
            default: Some(default),
            ..self
        }
    }

    fn arg(&self, heading: &'static str) -> Arg {
        let help = match self.effect {
            Effect::Ignored(reason) => format!("Accepted for compatibility and ignored: {reason}."),
            Effect::Applied => "Accepted for compatibility.".to_owned(),
            Effect::Refused(_) => "Refused: removed upstream.".to_owned(),
        };
        let help = match self.default {
            Some(d) => format!("{help} [upstream default: {d}]"),
            None => help,
        };
        let mut arg = Arg::new(self.name)
            .long(self.name)
            .help(help)
            .help_heading(heading)
            .hide(self.hidden)
            .visible_aliases(self.aliases);
        if let Some(s) = self.short {
            arg = arg.short(s);
        }
        if let Some(e) = self.env {
            arg = arg.env(e);
        }
        if self.switch {
            arg = arg
                .value_name("BOOL")
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .action(ArgAction::Set)
                .value_parser(BoolishValueParser::new());
        } else if self.repeatable {
            arg = arg.value_name("VALUE").action(ArgAction::Append);
        } else {
            arg = arg.value_name("VALUE").action(ArgAction::Set);
        }
        arg
    }
}

/// Adds `flags` to `cmd` under the help heading `heading`.
pub fn augment(cmd: Command, heading: &'static str, flags: &[Flag]) -> Command {
    cmd.args(flags.iter().map(|f| f.arg(heading)))
}

/// A compatibility flag that was given, on the command line or through its environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// Its long name.
    pub name: &'static str,
    /// Its value, as given (`true` for a bare switch).
    pub value: String,
    /// Why it is ignored, when it is.
    pub ignored: Option<&'static str>,
}

/// A compatibility flag whose feature is gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{name}: {message}")]
pub struct Refused {
    /// Its long name.
    pub name: &'static str,
    /// Why, in the replaced program's words.
    pub message: &'static str,
}

/// The compatibility flags given in `matches`, or the first refused one. A refused switch given as
/// `false` is fine (the feature is off either way).
pub fn given(matches: &ArgMatches, flags: &[Flag]) -> Result<Vec<Given>, Refused> {
    let mut out = Vec::new();
    for f in flags {
        let source = matches.value_source(f.name);
        if !matches!(source, Some(ValueSource::CommandLine | ValueSource::EnvVariable)) {
            continue;
        }
        let value = if f.switch {
            matches
                .get_one::<bool>(f.name)
                .copied()
                .unwrap_or_default()
                .to_string()
        } else {
            matches
                .get_many::<String>(f.name)
                .map(|values| values.cloned().collect::<Vec<_>>().join(","))
                .unwrap_or_default()
        };
        match f.effect {
            Effect::Refused(message) => {
                let off = value.is_empty() || (f.switch && value == "false");
                if !off {
                    return Err(Refused {
                        name: f.name,
                        message,
                    });
                }
            }
            Effect::Ignored(reason) => out.push(Given {
                name: f.name,
                value,
                ignored: Some(reason),
            }),
            Effect::Applied => out.push(Given {
                name: f.name,
                value,
                ignored: None,
            }),
        }
    }
    Ok(out)
}

/// Logs each ignored flag once, at warn level.
pub fn log_ignored(given: &[Given]) {
    for g in given {
        if let Some(reason) = g.ignored {
            tracing::warn!(flag = g.name, value = %g.value, "flag accepted for compatibility and ignored: {reason}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[
        Flag::ignored("sync-interval", "no cache resync")
            .short('s')
            .default("1h"),
        Flag::ignored_switch("enable-usages", "no Usages").default("true"),
        Flag::ignored("webhook-port", "no webhooks").env("COMPAT_TEST_WEBHOOK_PORT"),
        Flag::ignored("max-concurrent-reconciles", "fixed").aliases(&["max-reconcile-rate"]),
        Flag::ignored_switch("metrics", "x").applied(),
        Flag::refused("registry", false, "no default registry"),
        Flag::refused("enable-external-secret-stores", true, "removed"),
        Flag::ignored("legacy-csa-field-managers", "no CSA").repeatable(),
    ];

    fn parse(args: &[&str]) -> ArgMatches {
        augment(Command::new("t").arg(Arg::new("pos")), "Compat", FLAGS)
            .try_get_matches_from(std::iter::once("t").chain(args.iter().copied()))
            .expect("parses")
    }

    #[test]
    fn given_flags_are_listed_with_their_values_and_defaults_are_not() {
        let m = parse(&[
            "-s",
            "10m",
            "--enable-usages=false",
            "--max-reconcile-rate",
            "5",
            "--metrics",
        ]);
        let g = given(&m, FLAGS).expect("nothing refused");
        let names: Vec<(&str, &str)> = g.iter().map(|g| (g.name, g.value.as_str())).collect();
        assert_eq!(
            names,
            [
                ("sync-interval", "10m"),
                ("enable-usages", "false"),
                ("max-concurrent-reconciles", "5"),
                ("metrics", "true"),
            ]
        );
        assert_eq!(g[3].ignored, None);
        assert!(given(&parse(&[]), FLAGS).expect("ok").is_empty());
        let m = parse(&[
            "--legacy-csa-field-managers",
            "a",
            "--legacy-csa-field-managers",
            "b",
        ]);
        assert_eq!(given(&m, FLAGS).expect("ok")[0].value, "a,b");
    }

    #[test]
    fn a_switch_does_not_swallow_the_next_argument() {
        let m = parse(&["--enable-usages", "positional"]);
        assert_eq!(m.get_one::<String>("pos").map(String::as_str), Some("positional"));
        assert_eq!(m.get_one::<bool>("enable-usages"), Some(&true));
    }

    #[test]
    fn removed_features_are_refused_unless_turned_off() {
        let err = given(&parse(&["--registry", "index.docker.io"]), FLAGS).expect_err("refused");
        assert_eq!(err.name, "registry");
        assert!(err.to_string().contains("no default registry"));
        assert!(given(&parse(&["--enable-external-secret-stores=false"]), FLAGS).is_ok());
        assert!(given(&parse(&["--enable-external-secret-stores"]), FLAGS).is_err());
    }

    #[test]
    fn malformed_switch_values_are_usage_errors() {
        let err = augment(Command::new("t"), "Compat", FLAGS)
            .try_get_matches_from(["t", "--enable-usages=maybe"])
            .expect_err("usage error");
        assert_eq!(err.exit_code(), 2);
    }
}
