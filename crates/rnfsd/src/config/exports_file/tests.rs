use super::resolve::netgroup_hosts;
use super::*;
use crate::access::{ClientOpts, NOBODY};
use std::collections::HashMap;

/// Fixed answers: no DNS, no NIS.
#[derive(Default)]
struct Fake {
    hosts: HashMap<&'static str, Vec<&'static str>>,
    groups: HashMap<&'static str, Vec<&'static str>>,
}

impl Resolver for Fake {
    fn host(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        let v = self.hosts.get(name).ok_or("Name or service not known")?;
        Ok(v.iter().map(|a| a.parse().unwrap()).collect())
    }
    fn netgroup(&self, name: &str) -> Result<Vec<String>, String> {
        let v = self.groups.get(name).ok_or("unknown netgroup")?;
        Ok(v.iter().map(|s| s.to_string()).collect())
    }
}

fn fake() -> Fake {
    let mut f = Fake::default();
    f.hosts.insert("master", vec!["192.0.2.10"]);
    f.hosts.insert("trusty", vec!["192.0.2.11", "2001:db8::11"]);
    f.hosts.insert("pc001", vec!["192.0.2.20"]);
    f.hosts.insert("server", vec!["192.0.2.30"]);
    f.hosts.insert("ext1", vec!["198.51.100.1"]);
    f.hosts.insert("noaddr", vec![]);
    f.groups.insert("trusted", vec!["master", "192.0.2.40"]);
    f.groups.insert("external", vec!["ext1", "", "gone"]);
    f.groups
        .insert("admins", vec!["10.1.2.3", "pc001", "master"]);
    f
}

fn ok(text: &str) -> Parsed {
    parse(text, "F", &fake()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn bad(text: &str) -> String {
    match parse(text, "F", &fake()) {
        Ok(p) => panic!("{text:?} parsed: {p:?}"),
        Err(e) => e.0,
    }
}

/// The effective options of `ip` on export `i`.
fn opts(p: &Parsed, i: usize, ip: &str) -> Option<ClientOpts> {
    let a = p.exports[i].access().unwrap();
    a.lookup(ip.parse().unwrap()).copied()
}

fn knfsd_default() -> ClientOpts {
    ClientOpts {
        read_only: true,
        ..ClientOpts::default()
    }
}

fn warned(p: &Parsed, what: &str) -> bool {
    p.warnings.iter().any(|w| w.contains(what))
}

/// The `# sample /etc/exports file` of exports(5).
#[test]
fn man_page_sample() {
    let p = ok(r#"
# sample /etc/exports file
/               master(rw) trusty(rw,no_root_squash)
/projects       proj*.local.domain(rw)
/usr            *.local.domain(ro) @trusted(rw)
/home/joe       pc001(rw,all_squash,anonuid=150,anongid=100)
/pub            *(ro,insecure,all_squash)
/srv/www        -sync,rw server @trusted @external(ro)
/foo            2001:db8:9:e54::/64(rw) 192.0.2.0/24(rw)
/build          buildhost[0-9].local.domain(rw)
"#);
    let paths: Vec<_> = p.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "/",
            "/projects",
            "/usr",
            "/home/joe",
            "/pub",
            "/srv/www",
            "/foo",
            "/build"
        ]
    );
    let rw = ClientOpts {
        read_only: false,
        ..knfsd_default()
    };
    // /: master rw, trusty (both addresses) rw without squashing.
    assert_eq!(opts(&p, 0, "192.0.2.10"), Some(rw));
    let trusty = ClientOpts {
        root_squash: false,
        ..rw
    };
    assert_eq!(opts(&p, 0, "192.0.2.11"), Some(trusty));
    assert_eq!(opts(&p, 0, "2001:db8::11"), Some(trusty));
    assert_eq!(opts(&p, 0, "192.0.2.12"), None);
    assert_eq!(p.exports[0].access().unwrap().rules().len(), 3);
    // Wildcards get nobody, with a warning naming the line.
    assert!(p.exports[1].access().unwrap().rules().is_empty());
    assert!(warned(
        &p,
        "F:4: client \"proj*.local.domain\" not given access"
    ));
    assert!(warned(&p, "F:10: client \"buildhost[0-9].local.domain\""));
    assert!(p.exports[7].access().unwrap().rules().is_empty());
    // /usr: the netgroup's members, rw.
    assert!(warned(&p, "F:5: client \"*.local.domain\""));
    assert_eq!(opts(&p, 2, "192.0.2.10"), Some(rw));
    assert_eq!(opts(&p, 2, "192.0.2.40"), Some(rw));
    assert_eq!(p.exports[2].access().unwrap().rules().len(), 2);
    // /home/joe
    let joe = ClientOpts {
        read_only: false,
        all_squash: true,
        anonuid: 150,
        anongid: 100,
        ..knfsd_default()
    };
    assert_eq!(opts(&p, 3, "192.0.2.20"), Some(joe));
    // /pub: everyone, ro, any port, squashed.
    let public = ClientOpts {
        secure: false,
        all_squash: true,
        ..knfsd_default()
    };
    assert_eq!(opts(&p, 4, "203.0.113.9"), Some(public));
    assert_eq!(opts(&p, 4, "fe80::1"), Some(public));
    // /srv/www: -sync,rw for all; @external's own (ro) wins.
    let w = &p.exports[5];
    assert!(w.sync);
    assert_eq!(opts(&p, 5, "192.0.2.30"), Some(rw));
    assert_eq!(opts(&p, 5, "192.0.2.40"), Some(rw));
    assert_eq!(opts(&p, 5, "198.51.100.1"), Some(knfsd_default()));
    assert!(warned(
        &p,
        "F:8: netgroup @external: a member with an empty host field"
    ));
    assert!(warned(
        &p,
        "F:8: host \"gone\" (in netgroup @external) does not resolve"
    ));
    // /foo: networks.
    assert_eq!(opts(&p, 6, "2001:db8:9:e54::99"), Some(rw));
    assert_eq!(opts(&p, 6, "192.0.2.200"), Some(rw));
    assert_eq!(opts(&p, 6, "2001:db8:9:e55::1"), None);
    assert_eq!(opts(&p, 6, "192.0.3.1"), None);
    // Export-wide defaults and where each came from.
    for e in &p.exports {
        assert!(e.sync && !e.cross_mounts && e.id.is_none(), "{e:?}");
        // The export-wide options are the line's -opts: knfsd's ro
        // unless -rw.
        assert_eq!(e.read_only, e.path != Path::new("/srv/www"));
    }
    assert_eq!(p.exports[3].origin.as_deref(), Some("F:6"));
    assert_eq!(p.warnings.len(), 5, "{:#?}", p.warnings);
}

#[test]
fn every_option() {
    let one = |o: &str| {
        let p = ok(&format!("/x 10.0.0.1({o})"));
        (opts(&p, 0, "10.0.0.1").unwrap(), p)
    };
    let d = knfsd_default();
    let cases: &[(&str, ClientOpts)] = &[
        ("", d),
        (
            "rw",
            ClientOpts {
                read_only: false,
                ..d
            },
        ),
        ("rw,ro", d),
        (
            "no_root_squash",
            ClientOpts {
                root_squash: false,
                ..d
            },
        ),
        ("no_root_squash,root_squash", d),
        (
            "all_squash",
            ClientOpts {
                all_squash: true,
                ..d
            },
        ),
        ("all_squash,no_all_squash", d),
        (
            "anonuid=7,anongid=8",
            ClientOpts {
                anonuid: 7,
                anongid: 8,
                ..d
            },
        ),
        ("insecure", ClientOpts { secure: false, ..d }),
        ("insecure,secure", d),
    ];
    for (o, want) in cases {
        assert_eq!(one(o).0, *want, "{o}");
        assert!(one(o).1.warnings.is_empty(), "{o}");
    }
    assert_eq!((d.anonuid, d.anongid), (NOBODY, NOBODY));
    let e = |o: &str| one(o).1.exports.remove(0);
    assert!(e("sync").sync && e("").sync);
    assert!(!e("async").sync);
    assert!(e("crossmnt").cross_mounts && !e("").cross_mounts);
    assert_eq!(e("fsid=42").id, Some(42));
    assert_eq!(e("").id, None);
    // Harmless options: warned about, ignored.
    for o in [
        "wdelay",
        "no_wdelay",
        "subtree_check",
        "no_subtree_check",
        "hide",
        "nohide",
        "secure_locks",
        "auth_nlm",
        "insecure_locks",
        "no_auth_nlm",
        "nordirplus",
        "acl",
        "no_acl",
        "pnfs",
        "no_pnfs",
        "security_label",
        "refer=/a@h",
        "replicas=/a@h+g",
        "fsid=0",
        "fsid=root",
        "fsid=6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        "xprtsec=none",
        "sec=sys:none",
    ] {
        let (got, p) = one(o);
        assert_eq!(got, d, "{o}");
        assert_eq!(p.exports[0].id, None, "{o}");
        let name = o.split([':']).next().unwrap();
        assert!(
            p.warnings
                .iter()
                .any(|w| w.starts_with("F:1: option") && w.contains(name)),
            "{o}: {:?}",
            p.warnings
        );
    }
    assert_eq!(
        one("wdelay").1.warnings,
        ["F:1: option \"wdelay\" ignored: rnfsd does not delay writes to gather them"]
    );
    assert!(
        one("sec=sys").1.warnings.is_empty(),
        "sec=sys is what rnfsd does"
    );
}

#[test]
fn mountpoint_options() {
    let mp = |text: &str| ok(text).exports.remove(0).mountpoint;
    assert_eq!(mp("/x 10.0.0.1"), MountPoint::Off);
    for o in ["mp", "mountpoint"] {
        assert_eq!(mp(&format!("/x 10.0.0.1({o})")), MountPoint::Export, "{o}");
        assert_eq!(
            mp(&format!("/x -{o}=/srv 10.0.0.1 10.0.0.2(rw)")),
            MountPoint::At("/srv".into()),
            "{o}"
        );
        let e = bad(&format!("/x 10.0.0.1({o}=srv)"));
        assert!(
            e.starts_with(&format!(
                "F:1: option \"{o}=srv\": mountpoint \"srv\" is not an absolute path"
            )),
            "{e}"
        );
    }
    assert!(ok("/x 10.0.0.1(mp)").warnings.is_empty());
    // Per export in rnfsd: the clients of a line must agree.
    let e = bad("/x 10.0.0.1(mp) 10.0.0.2");
    assert!(
        e.contains("differ in sync/async, fsid, crossmnt or mountpoint"),
        "{e}"
    );
    assert!(bad("/x 10.0.0.1(mp=/a) 10.0.0.2(mp=/b)").contains("mountpoint"));
}

#[test]
fn errors_name_the_line() {
    let cases = [
        ("/x 10.0.0.1(bogus)", "F:1: unknown option \"bogus\""),
        ("\n\n/x a(rw) 10.0.0.1(anonuid=x)", "F:3: option \"anonuid=x\": not a number"),
        ("/x 10.0.0.1(anongid=-2)", "F:1: option \"anongid=-2\""),
        ("/x 10.0.0.1(anonuid)", "F:1: option \"anonuid\""),
        ("/x 10.0.0.1(fsid=abc)", "F:1: option \"fsid=abc\": fsid must be"),
        ("/x 10.0.0.1(fsid=99999999999)", "F:1: option \"fsid=99999999999\""),
        ("/x 10.0.0.1(sec=krb5p)", "F:1: option \"sec=krb5p\": flavor \"krb5p\""),
        ("/x 10.0.0.1(sec=sys:krb5)", "F:1: option \"sec=sys:krb5\""),
        ("/x 10.0.0.1(sec=none)", "F:1: option \"sec=none\": rnfsd serves sec=sys only"),
        ("/x 10.0.0.1(xprtsec=mtls)", "F:1: option \"xprtsec=mtls\""),
        ("/x 10.0.0.1(rw=10.0.0.2)", "F:1: unknown option \"rw=10.0.0.2\""),
        ("/x 10.0.0.1(wdelay=1)", "F:1: unknown option \"wdelay=1\""),
        ("/x -bogus 10.0.0.1", "F:1: unknown option \"bogus\""),
        ("# c\n/x 10.0.0.1 -rw", "F:2: \"-rw\": default options"),
        ("/x 10.0.0.1(rw", "F:1: \"10.0.0.1(rw\": options must be"),
        ("/x 10.0.0.1(rw)x", "F:1: \"10.0.0.1(rw)x\""),
        ("/x 10.0.0.1(rw)(ro)", "F:1: "),
        ("x 10.0.0.1", "F:1: export path \"x\" is not absolute"),
        ("/x\\1 *", "F:1: path \"/x\\\\1\": a backslash"),
        ("/x\\000 *", "F:1: path"),
        ("\"/x *", "F:1: unterminated quote"),
        ("/x \"a\nb\"", "F:1: unterminated quote"),
        ("/x 10.0.0.1/255.0.255.0", "F:1: client \"10.0.0.1/255.0.255.0\": netmask 255.0.255.0 is not contiguous"),
        ("/x 10.0.0.1/8", "F:1: client \"10.0.0.1/8\": address has bits set"),
        ("/x 10.0.0.0/33", "F:1: client \"10.0.0.0/33\""),
        ("/x ::/255.0.0.0", "F:1: client \"::/255.0.0.0\""),
        ("/x nothost/8", "F:1: client \"nothost/8\""),
        ("/x @", "F:1: client \"@\""),
        ("/x ho$t", "F:1: client \"ho$t\""),
        ("/x\n\n/x/ 10.0.0.1", "F:3: /x/ is already exported on line 1"),
        ("/x 10.0.0.1(sync) 10.0.0.2(async)", "F:1: clients \"10.0.0.1(sync)\" and \"10.0.0.2(async)\""),
        ("/x 10.0.0.1 \\\n 10.0.0.2(fsid=3)", "F:2: clients \"10.0.0.1\" and \"10.0.0.2(fsid=3)\""),
        ("/x -crossmnt 10.0.0.1 10.0.0.2(crossmnt) \\\n 10.0.0.3(nocrossmnt)", "F:2: unknown option \"nocrossmnt\""),
        ("/x 10.0.0.1(crossmnt) 10.0.0.2", "F:1: clients"),
        ("/x 10.0.0.1(ro) 10.0.0.1(rw)", "F:1: client 10.0.0.1 (from \"10.0.0.1(rw)\") is also given by \"10.0.0.1(ro)\" on line 1"),
        ("/x @trusted(ro) @admins(rw)", "F:1: client 192.0.2.10 (from \"@admins(rw)\") is also given by \"@trusted(ro)\""),
    ];
    for (text, want) in cases {
        let e = bad(text);
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
}

#[test]
fn lines_comments_quotes_and_escapes() {
    let p = ok("  # only a comment\n\n\
                /a 10.0.0.1(rw) # trailing comment 10.0.0.2\n\
                /b \\\n   10.0.0.1 \\\n\t10.0.0.2(rw)\n\
                \"/srv/my dir\" 10.0.0.3\n\
                /srv/tab\\011and\\040space 10.0.0.4\n\
                \"/q#h\" 10.0.0.5\n\
                /c 10.0.0.6 # \\\n\
                /d 10.0.0.7");
    let paths: Vec<_> = p.exports.iter().map(|e| e.path.to_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "/a",
            "/b",
            "/srv/my dir",
            "/srv/tab\tand space",
            "/q#h",
            "/c",
            "/d"
        ]
    );
    assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
    assert_eq!(opts(&p, 1, "10.0.0.1"), Some(knfsd_default()));
    assert!(!opts(&p, 1, "10.0.0.2").unwrap().read_only);
    assert_eq!(p.exports[1].origin.as_deref(), Some("F:4"));
    assert_eq!(p.exports[2].origin.as_deref(), Some("F:7"));
    assert_eq!(p.exports[6].origin.as_deref(), Some("F:11"));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert!(ok("").exports.is_empty());
    assert!(ok("# nothing\n").exports.is_empty());
}

#[test]
fn defaults_bare_options_and_no_clients() {
    // -opts applies to every client of the line, each client's own
    // options on top.
    let p = ok("/x -rw,no_root_squash,anonuid=5 10.0.0.1 10.0.0.2(ro) 10.0.0.3(root_squash)");
    let base = ClientOpts {
        read_only: false,
        root_squash: false,
        anonuid: 5,
        ..knfsd_default()
    };
    assert_eq!(opts(&p, 0, "10.0.0.1"), Some(base));
    assert_eq!(
        opts(&p, 0, "10.0.0.2"),
        Some(ClientOpts {
            read_only: true,
            ..base
        })
    );
    assert_eq!(
        opts(&p, 0, "10.0.0.3"),
        Some(ClientOpts {
            root_squash: true,
            ..base
        })
    );
    let p = ok("/x -async,crossmnt,fsid=9 10.0.0.1 10.0.0.2(rw)");
    let e = &p.exports[0];
    assert_eq!((e.sync, e.cross_mounts, e.id), (false, true, Some(9)));
    // A bare (opts) is *(opts) (the classic "host (rw)" mistake): kept
    // when it gives the world nothing more than the defaults...
    let p = ok("/x 10.0.0.1 (sync,all_squash)");
    assert_eq!(opts(&p, 0, "10.0.0.1"), Some(knfsd_default()));
    let world = opts(&p, 0, "203.0.113.1").unwrap();
    assert!(world.read_only && world.all_squash && world.secure);
    assert!(
        p.warnings[0].starts_with("F:1: no client before \"(sync,all_squash)\""),
        "{:?}",
        p.warnings
    );
    // ... refused when the world would get rw, no_root_squash or
    // insecure (exportfs accepts them all).
    for (text, want) in [
        ("/x 10.0.0.1 (rw)", "F:1: no client before \"(rw)\": exportfs gives these options to every host (*), here with rw: write *(rw)"),
        ("/x 10.0.0.1 \\\n  (no_root_squash)", "F:2: no client before \"(no_root_squash)\": exportfs gives these options to every host (*), here with no_root_squash"),
        ("/x 10.0.0.1 (ro,insecure)", "F:1: no client before \"(ro,insecure)\": exportfs gives these options to every host (*), here with insecure"),
        ("/x -rw 10.0.0.1 (sync)", "here with rw"),
        ("/x -no_root_squash,insecure,rw 10.0.0.1 (ro)", "here with no_root_squash, insecure"),
    ] {
        let e = bad(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
    assert!(ok("/x -rw 10.0.0.1 (ro)").warnings[0].contains("no client before"));
    // No clients: everyone, read-only with the defaults, and a warning...
    let p = ok("/x\n/y -ro,all_squash,async");
    assert_eq!(opts(&p, 0, "203.0.113.1"), Some(knfsd_default()));
    assert!(opts(&p, 1, "203.0.113.1").unwrap().all_squash);
    assert_eq!(p.warnings.len(), 2);
    assert!(p.warnings[1].starts_with("F:2: /y has no clients"));
    // ... and refused with options that open it.
    for (text, want) in [
        ("/y -rw", "F:1: /y has no clients: exportfs exports it to every host (*), here with rw: list the clients"),
        ("\n/y -no_root_squash", "F:2: /y has no clients: exportfs exports it to every host (*), here with no_root_squash"),
        ("/y -insecure", "here with insecure"),
    ] {
        let e = bad(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
    // Same options twice is harmless (a name and its address).
    let p = ok("/x master(rw) 192.0.2.10(rw)");
    assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
}

#[test]
fn client_forms() {
    let p = ok(
        "/x 10.1.0.0/255.255.0.0(rw) 10.2.0.0/16 172.16.0.0/255.240.0.0 \
                0.0.0.0/0.0.0.0(insecure) fd00::/8(rw) ::1 fe80::1/128 10.3.3.3",
    );
    let a = p.exports[0].access().unwrap();
    let texts: Vec<_> = a.rules().iter().map(|r| r.spec.to_string()).collect();
    // Hosts first, then networks in order (exports(5) precedence).
    assert_eq!(
        texts,
        [
            "::1",
            "fe80::1/128",
            "10.3.3.3",
            "10.1.0.0/16",
            "10.2.0.0/16",
            "172.16.0.0/12",
            "0.0.0.0/0",
            "fd00::/8",
        ]
    );
    assert!(!opts(&p, 0, "10.1.2.3").unwrap().read_only);
    assert!(opts(&p, 0, "10.2.2.3").unwrap().read_only);
    assert!(opts(&p, 0, "172.31.0.1").is_some());
    assert!(!opts(&p, 0, "8.8.8.8").unwrap().secure);
    assert!(!opts(&p, 0, "::ffff:8.8.8.8").unwrap().secure, "mapped v4");
    assert!(!opts(&p, 0, "fd12::1").unwrap().read_only);
    assert!(opts(&p, 0, "fe80::2").is_none());
    // Names: unresolvable or addressless hosts, unknown netgroups.
    let p = ok("/x nowhere(rw) noaddr @nogroup 10.0.0.1");
    assert_eq!(p.exports[0].access().unwrap().rules().len(), 1);
    assert!(warned(
        &p,
        "F:1: host \"nowhere\" does not resolve (Name or service not known): not given access"
    ));
    assert!(warned(&p, "F:1: host \"noaddr\" has no address"));
    assert!(warned(
        &p,
        "F:1: netgroup @nogroup not given access: unknown netgroup"
    ));
    for w in ["h?st", "*", "a*"] {
        let p = ok(&format!("/x {w}"));
        assert_eq!(p.warnings.is_empty(), w == "*", "{w}");
    }
}

/// Netgroup members rank after networks and before `*`, as nfs-utils'
/// MCL_NETGROUP after MCL_SUBNETWORK; a host listed by name or address
/// ranks before them.
#[test]
fn netgroups_rank_after_networks() {
    let p = ok("/x 10.0.0.0/8(ro) @admins(rw,no_root_squash) *(ro,all_squash)");
    let admin = ClientOpts {
        read_only: false,
        root_squash: false,
        ..knfsd_default()
    };
    assert_eq!(opts(&p, 0, "10.1.2.3"), Some(knfsd_default()), "10/8 wins");
    assert_eq!(opts(&p, 0, "192.0.2.20"), Some(admin), "pc001: the group");
    assert!(opts(&p, 0, "192.0.2.99").unwrap().all_squash, "*");
    let texts: Vec<String> = p.exports[0]
        .access()
        .unwrap()
        .rules()
        .iter()
        .map(|r| r.spec.to_string())
        .collect();
    assert_eq!(
        texts,
        ["10.0.0.0/8", "10.1.2.3", "192.0.2.20", "192.0.2.10", "*"]
    );
    // The same order whatever the order written.
    let q = ok("/x *(ro,all_squash) @admins(rw,no_root_squash) 10.0.0.0/8(ro)");
    assert_eq!(opts(&q, 0, "10.1.2.3"), Some(knfsd_default()));
    // A host named directly outranks its netgroup, so differing options
    // are no conflict.
    let p = ok("/x @admins(rw) master(ro)");
    assert_eq!(opts(&p, 0, "192.0.2.10"), Some(knfsd_default()));
    assert!(!opts(&p, 0, "192.0.2.20").unwrap().read_only);
    // Two netgroups with one member: the same rank, an error (above).
    assert!(bad("/x @trusted(rw) @admins(ro)").contains("192.0.2.10"));
    assert_eq!(
        ok("/x @trusted(rw) @admins(rw)").exports[0]
            .access()
            .unwrap()
            .rules()
            .len(),
        4
    );
}

#[test]
fn getent_output() {
    assert_eq!(
        netgroup_hosts("trusted   (master,,) (192.0.2.40,joe,dom) (,bob,) (-,x,)\n"),
        ["master", "192.0.2.40", "", "-"]
    );
    assert!(netgroup_hosts("").is_empty());
    assert_eq!(netgroup_hosts("g (a,,"), Vec::<String>::new());
    assert!(is_uuid("6ba7b810:9dad11d1:80b400c0:4fd430c8"));
    assert!(!is_uuid("6ba7b810"));
}

#[test]
fn load_names_the_file() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("exports");
    let e = load(&f, &fake()).unwrap_err().0;
    assert!(
        e.contains("cannot read exports file") && e.contains(f.to_str().unwrap()),
        "{e}"
    );
    std::fs::write(&f, "/x 10.0.0.1(wdelay)\n/y 10.0.0.1(nope)\n").unwrap();
    let e = load(&f, &fake()).unwrap_err().0;
    assert_eq!(e, format!("{}:2: unknown option \"nope\"", f.display()));
}
