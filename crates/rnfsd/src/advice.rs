//! First-run advice: after the start line, one sentence for each way the
//! defaults may surprise whoever just ran `rnfsd serve DIR`, with the
//! option that changes it (nothing printed when nothing applies).

use std::net::SocketAddr;

use crate::access::ExportAccess;

/// What the advice looks at for one export.
pub struct ExportFacts<'a> {
    pub path: &'a str,
    /// Owner and mode of the exported directory.
    pub owner: u32,
    pub mode: u32,
    pub access: &'a ExportAccess,
}

/// The notes for a server running as `euid`, listening on `listen`.
pub fn notes(euid: u32, listen: &[SocketAddr], exports: &[ExportFacts<'_>]) -> Vec<String> {
    let mut v = Vec::new();
    if !listen.is_empty() && listen.iter().all(|a| a.ip().is_loopback()) {
        v.push(
            "only this host can mount (listening on loopback): add --listen 0.0.0.0:2049 and \
             --client NETWORK (or `listen` and `clients` in the configuration) to serve others"
                .to_owned(),
        );
    }
    if euid != 0 {
        v.push(format!(
            "running without root, so every client works here as uid {euid} whatever user it \
             claims to be: run as root for per-user permissions"
        ));
        return v;
    }
    for e in exports {
        // Someone's own directory (not root's, not writable by all): with
        // root squashed, root on a client (who mounts, and often copies
        // first) is refused writes there.
        let squashed = e
            .access
            .rules()
            .iter()
            .any(|r| r.opts.root_squash && !r.opts.all_squash && !r.opts.read_only);
        let anon = e
            .access
            .rules()
            .first()
            .map_or(crate::access::NOBODY, |r| r.opts.anonuid);
        if squashed && e.owner != 0 && e.owner != anon && e.mode & 0o002 == 0 {
            v.push(format!(
                "{} belongs to uid {}, and root on clients is squashed to uid {anon}, so only \
                 uid {} on a client can write there: --anonuid {} makes client root write as \
                 that user, --no-root-squash as root",
                e.path, e.owner, e.owner, e.owner
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{ClientOpts, ClientSpec, Rule};

    fn access(root_squash: bool, read_only: bool) -> ExportAccess {
        ExportAccess::new(vec![Rule {
            spec: ClientSpec::parse("*").unwrap(),
            opts: ClientOpts {
                read_only,
                root_squash,
                all_squash: false,
                anonuid: 65534,
                anongid: 65534,
                secure: true,
            },
        }])
    }

    fn facts<'a>(owner: u32, mode: u32, a: &'a ExportAccess) -> ExportFacts<'a> {
        ExportFacts {
            path: "/home/alice/share",
            owner,
            mode,
            access: a,
        }
    }

    #[test]
    fn each_surprise_gets_one_sentence_with_its_option() {
        let lo: Vec<SocketAddr> = vec!["127.0.0.1:2049".parse().unwrap()];
        let any: Vec<SocketAddr> = vec!["0.0.0.0:2049".parse().unwrap()];
        let squash = access(true, false);
        let n = notes(0, &lo, &[facts(1000, 0o755, &squash)]);
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(n[0].contains("--listen 0.0.0.0:2049"), "{n:?}");
        assert!(
            n[1].contains("uid 1000") && n[1].contains("--anonuid 1000"),
            "{n:?}"
        );
        assert!(n[1].contains("--no-root-squash"), "{n:?}");
        for s in &n {
            assert_eq!(s.matches(". ").count(), 0, "one sentence: {s}");
        }
        // Nothing to say: exposed, root's or a shared directory, or root
        // not squashed, or read-only.
        assert!(notes(0, &any, &[facts(0, 0o755, &squash)]).is_empty());
        assert!(notes(0, &any, &[facts(1000, 0o1777, &squash)]).is_empty());
        assert!(notes(0, &any, &[facts(1000, 0o755, &access(false, false))]).is_empty());
        assert!(notes(0, &any, &[facts(1000, 0o755, &access(true, true))]).is_empty());
        assert!(notes(0, &any, &[facts(65534, 0o755, &squash)]).is_empty());
        // Unprivileged: that is the one thing to know about identities.
        let n = notes(1000, &any, &[facts(1000, 0o755, &squash)]);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains("uid 1000") && n[0].contains("run as root"),
            "{n:?}"
        );
    }
}
