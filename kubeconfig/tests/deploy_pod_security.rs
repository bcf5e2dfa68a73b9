//! Every pod template in `deploy/` passes the Pod Security Standards
//! "restricted" profile (v1.30 rules, checked on the typed objects by
//! `pod_security`, whose own tests show each rule can fail), and every
//! image is pinned: a tag that is not `latest`, or a digest. The
//! switchyard image is the workspace's version, and the Containerfile's
//! base images are pinned too.

mod deploy_support;
mod pod_security;

use anyhow::{Context, Result};
use deploy_support::{deploy_dir, manifests, pod_spec};

#[test]
fn every_pod_template_passes_pod_security_restricted() -> Result<()> {
    let m = manifests()?;
    let templates = m.pod_templates();
    assert_eq!(templates.len(), 4, "three coordinators and the proxies");
    let mut violations = Vec::new();
    for (object, template) in &templates {
        violations.extend(pod_security::check(object, template));
    }
    let text: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(text.is_empty(), "{}", text.join("\n"));
    Ok(())
}

/// Why `image` is not pinned, if it is not: a digest pins it; otherwise
/// it needs a tag (after the last `/`, so a registry port is no tag) other
/// than `latest`.
fn unpinned(image: &str) -> Option<&'static str> {
    if let Some((_, digest)) = image.split_once('@') {
        return (!digest.starts_with("sha256:") || digest.len() != 7 + 64)
            .then_some("a digest that is not sha256:<64 hex>");
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => Some("no tag (means latest)"),
        Some((_, "latest")) => Some("the latest tag"),
        Some((_, "")) => Some("an empty tag"),
        Some(_) => None,
    }
}

#[test]
fn the_pin_rule_can_fail() {
    for (image, why) in [
        ("switchyard", "no tag (means latest)"),
        (
            "registry.example.com:5000/switchyard",
            "no tag (means latest)",
        ),
        ("registry.example.com/switchyard:latest", "the latest tag"),
        ("switchyard:", "an empty tag"),
        (
            "switchyard@sha256:abc",
            "a digest that is not sha256:<64 hex>",
        ),
    ] {
        assert_eq!(unpinned(image), Some(why), "{image}");
    }
    let digest = format!("switchyard@sha256:{}", "a".repeat(64));
    for image in [
        "switchyard:0.1.0",
        "registry.example.com:5000/switchyard:0.1.0",
        digest.as_str(),
    ] {
        assert_eq!(unpinned(image), None, "{image}");
    }
}

#[test]
fn every_image_is_pinned_to_this_release() -> Result<()> {
    let m = manifests()?;
    let mut images = Vec::new();
    for (object, template) in m.pod_templates() {
        let pod = pod_spec(template)?;
        for c in pod.init_containers.iter().flatten().chain(&pod.containers) {
            let image = c.image.clone().unwrap_or_default();
            if let Some(why) = unpinned(&image) {
                panic!("{object} container {}: image {image:?} has {why}", c.name);
            }
            images.push(image);
        }
    }
    assert_eq!(images.len(), 5, "{images:?}");
    // The one switchyard image, at the version this tree builds.
    let want = format!(
        "registry.example.com/switchyard:{}",
        env!("CARGO_PKG_VERSION")
    );
    for image in &images {
        assert_eq!(image, &want);
    }
    Ok(())
}

#[test]
fn the_containerfile_base_images_are_pinned() -> Result<()> {
    let text = std::fs::read_to_string(deploy_dir().join("Containerfile"))?;
    let bases: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FROM "))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    let [builder, runtime] = bases.as_slice() else {
        anyhow::bail!("a build and a run stage: {bases:?}");
    };
    for base in &bases {
        assert_eq!(unpinned(base), None, "FROM {base}");
    }
    // The builder is the toolchain the workspace names, to the patch
    // release (`1.95` becomes `1.95.N`), on the runtime's Debian release.
    let tag = |image: &str| image.rsplit_once(':').map(|(_, t)| t.to_string());
    let builder_tag = tag(builder).unwrap_or_default();
    let (rust, debian) = builder_tag
        .split_once('-')
        .with_context(|| format!("rust:VERSION-DEBIAN, not {builder}"))?;
    let minor = env!("CARGO_PKG_RUST_VERSION");
    assert!(
        rust.strip_prefix(minor)
            .and_then(|patch| patch.strip_prefix('.'))
            .is_some_and(|patch| !patch.is_empty() && patch.chars().all(|c| c.is_ascii_digit())),
        "FROM {builder}: want rust {minor}.N"
    );
    assert!(
        tag(runtime).is_some_and(|t| t.starts_with(debian)),
        "FROM {runtime}: want the builder's Debian release {debian}"
    );
    Ok(())
}
