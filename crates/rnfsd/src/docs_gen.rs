//! `rnfsd generate-docs --out DIR` (hidden): man pages and shell
//! completions generated from the clap definition, so they cannot drift
//! from `--help`; scripts/package.sh runs it before building the package.
//!
//! DIR/man/: rnfsd.8, one rnfsd-SUB.8 per subcommand, and rnfsd.toml.5
//! (written by hand in packaging/, embedded here so the binary alone
//! produces the whole set). DIR/completions/: rnfsd.bash, _rnfsd (zsh),
//! rnfsd.fish.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;
use clap_mangen::Man;

use crate::cli::Cli;

/// The configuration file's page, rnfsd.toml(5).
pub const CONFIG_PAGE: &str = include_str!("../../../packaging/rnfsd.toml.5");

/// Writes every page and completion under `out`; returns the files written.
pub fn generate(out: &Path) -> io::Result<Vec<PathBuf>> {
    let man_dir = out.join("man");
    let comp_dir = out.join("completions");
    fs::create_dir_all(&man_dir)?;
    fs::create_dir_all(&comp_dir)?;
    let mut written = Vec::new();

    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Fills in display names ("rnfsd-serve") and bin names ("rnfsd serve").
    cmd.build();
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        // Subcommands carry no version of their own; the pages show it.
        .map(|s| s.clone().version(env!("CARGO_PKG_VERSION")))
        .collect();
    let sub_pages: Vec<String> = subs.iter().map(page_name).collect();

    let mut see_also: Vec<String> = sub_pages.iter().map(|p| format!("{p}(8)")).collect();
    see_also.extend(["rnfsd.toml(5)".into(), "exports(5)".into(), "nfs(5)".into()]);
    written.push(write_page(&man_dir, cmd.clone(), &see_also, "")?);
    for (sub, name) in subs.into_iter().zip(&sub_pages) {
        let mut also = vec!["rnfsd(8)".to_string(), "rnfsd.toml(5)".to_string()];
        let extra = if name == "rnfsd-serve" {
            also.push("exports(5)".into());
            SERVE_EXTRA
        } else {
            ""
        };
        written.push(write_page(&man_dir, sub, &also, extra)?);
    }
    let p = man_dir.join("rnfsd.toml.5");
    fs::write(&p, CONFIG_PAGE)?;
    written.push(p);

    // clap_complete offers hidden subcommands too: complete a copy of the
    // top level without them (it has no arguments of its own).
    let top = Cli::command();
    let mut visible = clap::Command::new("rnfsd")
        .version(env!("CARGO_PKG_VERSION"))
        .about(top.get_about().cloned().unwrap_or_default())
        .subcommand_required(true)
        .subcommands(top.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        written.push(clap_complete::generate_to(
            shell,
            &mut visible,
            "rnfsd",
            &comp_dir,
        )?);
    }
    Ok(written)
}

fn page_name(c: &clap::Command) -> String {
    c.get_display_name().unwrap_or(c.get_name()).to_string()
}

/// Files and signals of `rnfsd serve`, in place of the long help's key list
/// (rnfsd.toml(5) has it in full).
const SERVE_EXTRA: &str = r#".SH SIGNALS
.TP
\fBSIGHUP\fR
Re-read the configuration (and exports) file: exports added, removed or
changed go live, connections kept; \fB[server]\fR keys need a restart.
.TP
\fBSIGINT\fR, \fBSIGTERM\fR
Stop accepting calls, flush queued replies (\fBshutdown_timeout_secs\fR) and exit.
.SH FILES
.TP
\fI/etc/rnfsd.toml\fR
The configuration file the packaged service uses (see \fBrnfsd.toml\fR(5)).
.TP
\fI/var/lib/rnfsd/handle.key\fR
The handle key (as root; see \fB\-\-state\-dir\fR). Losing it makes every
handle clients hold stale.
.TP
\fI/var/lib/rnfsd/admin.sock\fR
The admin socket \fBrnfsd stats\fR reads.
"#;

/// One section-8 page: clap's sections, then `extra` roff and SEE ALSO.
fn write_page(
    dir: &Path,
    cmd: clap::Command,
    see_also: &[String],
    extra: &str,
) -> io::Result<PathBuf> {
    let has_subs = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let man = Man::new(cmd).section("8").manual("System Administration");
    let path = dir.join(man.get_filename());
    let mut w = io::BufWriter::new(fs::File::create(&path)?);
    man.render_title(&mut w)?;
    man.render_name_section(&mut w)?;
    man.render_synopsis_section(&mut w)?;
    man.render_description_section(&mut w)?;
    man.render_options_section(&mut w)?;
    if has_subs {
        man.render_subcommands_section(&mut w)?;
    }
    w.write_all(extra.as_bytes())?;
    man.render_version_section(&mut w)?;
    let refs: Vec<String> = see_also
        .iter()
        .map(|r| {
            let (name, sect) = r.split_once('(').unwrap_or((r, ""));
            format!("\\fB{}\\fR({sect}", name.replace('-', "\\-"))
        })
        .collect();
    writeln!(w, ".SH \"SEE ALSO\"\n{}", refs.join(",\n"))?;
    w.flush()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys serde accepts for `T`, from the toml crate's "unknown
    /// field `x`, expected one of `a`, `b`, ..." error.
    fn accepted_keys<T: serde::de::DeserializeOwned + std::fmt::Debug>() -> Vec<String> {
        let e = toml::from_str::<T>("no_such_key_xyz = 1\n").unwrap_err();
        let msg = e.to_string();
        let rest = msg
            .split_once("expected one of ")
            .or_else(|| msg.split_once("expected "))
            .unwrap_or_else(|| panic!("unexpected error: {msg}"))
            .1;
        let keys: Vec<String> = rest
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        assert!(keys.len() >= 2, "no keys found in {msg:?}");
        keys
    }

    /// The page between the `.SS` heading `start` and the next `.SS`/`.SH`.
    fn section<'a>(page: &'a str, start: &str) -> &'a str {
        let head = format!(".SS \"{start}\"\n");
        let at = page
            .find(&head)
            .unwrap_or_else(|| panic!("rnfsd.toml.5 has no {head:?}"))
            + head.len();
        let rest = &page[at..];
        let end = ["\n.SS ", "\n.SH "]
            .iter()
            .filter_map(|m| rest.find(m))
            .min()
            .unwrap_or(rest.len());
        &rest[..end]
    }

    #[test]
    fn config_page_documents_every_key() {
        use crate::config::{ClientConfig, ExportConfig, ServerConfig};
        for (table, keys) in [
            ("[server]", accepted_keys::<ServerConfig>()),
            ("[[export]]", accepted_keys::<ExportConfig>()),
            ("[[export.client]]", accepted_keys::<ClientConfig>()),
        ] {
            let text = section(CONFIG_PAGE, table);
            let missing: Vec<&String> = keys
                .iter()
                .filter(|k| !text.contains(&format!(".TP\n\\fB{k}\\fR")))
                .collect();
            assert!(
                missing.is_empty(),
                "packaging/rnfsd.toml.5, {table}: no entry (.TP then \\fBkey\\fR) for {missing:?}"
            );
        }
    }

    /// The text after `\fBkey\fR = ` on the key's `.TP` line of `section`.
    fn page_default<'a>(section: &'a str, key: &str) -> Option<&'a str> {
        let head = format!(".TP\n\\fB{key}\\fR = ");
        let at = section.find(&head)? + head.len();
        section[at..].lines().next()
    }

    /// The page shows each key with the default the key table has (and
    /// `rnfsd serve --help` prints).
    #[test]
    fn config_page_shows_the_defaults_of_the_key_table() {
        use crate::config::keys::export_keys;
        let export = export_keys()
            .into_iter()
            .take_while(|k| k.name != "[export.cephfs]")
            .filter(|k| !k.name.starts_with('[') && k.name != "path");
        for (table, keys) in [
            ("[server]", crate::config::server_keys()),
            ("[[export]]", export.collect()),
        ] {
            let text = section(CONFIG_PAGE, table);
            for k in keys {
                let shown = page_default(text, k.name).map(|d| d.replace("\\-", "-"));
                assert_eq!(
                    shown.as_deref(),
                    Some(k.default.as_str()),
                    "packaging/rnfsd.toml.5, {table} {}",
                    k.name
                );
            }
        }
    }

    /// The unit's bounding set is exactly what privileges.rs keeps: less
    /// breaks requests, more is dropped at start anyway.
    #[test]
    fn unit_bounding_set_is_what_rnfsd_keeps() {
        let unit = include_str!("../../../packaging/rnfsd.service");
        let line = unit
            .lines()
            .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
            .expect("rnfsd.service has no CapabilityBoundingSet");
        let mut in_unit: Vec<&str> = line.split_whitespace().collect();
        let mut kept: Vec<String> = crate::privileges::KEPT
            .iter()
            .map(|c| c.to_string())
            .collect();
        in_unit.sort_unstable();
        kept.sort_unstable();
        assert_eq!(in_unit, kept, "packaging/rnfsd.service vs privileges::KEPT");
    }

    #[test]
    fn generates_pages_and_completions() {
        let dir = tempfile::tempdir().unwrap();
        let files = generate(dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "rnfsd.8",
            "rnfsd-serve.8",
            "rnfsd-check-config.8",
            "rnfsd-stats.8",
            "rnfsd-exportfs.8",
            "rnfsd.toml.5",
            "rnfsd.bash",
            "_rnfsd",
            "rnfsd.fish",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("generate-docs")));
        let serve = fs::read_to_string(dir.path().join("man/rnfsd-serve.8")).unwrap();
        assert!(serve.contains("\\-\\-config") && serve.contains("SIGHUP"));
        let bash = fs::read_to_string(dir.path().join("completions/rnfsd.bash")).unwrap();
        assert!(bash.contains("check-config") && bash.contains("--listen"));
        for f in [
            "completions/rnfsd.bash",
            "completions/_rnfsd",
            "completions/rnfsd.fish",
        ] {
            let text = fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(
                !text.contains("generate-docs"),
                "{f} offers the hidden command"
            );
        }
    }
}
