//! Which of the controllers sliced replaces run: kube-controller-manager's `--controllers`.

/// The controllers a pass runs: kube-controller-manager's `--controllers`, for the four sliced
/// replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controllers {
    pub endpointslice: bool,
    pub endpoints: bool,
    pub mirroring: bool,
    /// The service (LoadBalancer) controller.
    pub load_balancer: bool,
}

impl Controllers {
    pub const ALL: Controllers = Controllers {
        endpointslice: true,
        endpoints: true,
        mirroring: true,
        load_balancer: true,
    };
    pub const ENDPOINTSLICE: Controllers = Controllers {
        endpointslice: true,
        endpoints: false,
        mirroring: false,
        load_balancer: false,
    };
    /// The service controller alone.
    pub const LOAD_BALANCER: Controllers = Controllers {
        endpointslice: false,
        endpoints: false,
        mirroring: false,
        load_balancer: true,
    };
    /// The three controllers of endpoints, without the service controller.
    pub const ENDPOINT_CONTROLLERS: Controllers = Controllers {
        load_balancer: false,
        ..Controllers::ALL
    };
    /// The names `parse` knows.
    pub const NAMES: [&'static str; 4] = ["endpointslice", "endpoints", "mirroring", "service-lb"];

    /// A comma-separated list of controller names; `all` (or nothing) selects every one.
    /// kube-controller-manager's spelling is accepted too: `*` for every one, its names
    /// (`endpoint`, `endpointslice`, `endpointslicemirroring`, and the newer `endpoints-controller`,
    /// `endpointslice-controller`, `endpointslice-mirroring-controller`), and `-name` to switch one
    /// off whatever else is listed.
    pub fn parse(list: &str) -> Result<Controllers, String> {
        let mut selected = Controllers {
            endpointslice: false,
            endpoints: false,
            mirroring: false,
            load_balancer: false,
        };
        let mut disabled = selected;
        let mut any = false;
        for entry in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            any = true;
            if entry == "all" || entry == "*" {
                selected = Controllers::ALL;
                continue;
            }
            let (target, name) = match entry.strip_prefix('-') {
                Some(name) => (&mut disabled, name),
                None => (&mut selected, entry),
            };
            match name {
                "endpointslice" | "endpointslice-controller" => target.endpointslice = true,
                "endpoints" | "endpoint" | "endpoints-controller" => target.endpoints = true,
                "mirroring"
                | "endpointslicemirroring"
                | "endpointslice-mirroring"
                | "endpointslice-mirroring-controller" => target.mirroring = true,
                "service-lb" | "service" | "service-lb-controller" => target.load_balancer = true,
                _ => {
                    return Err(format!(
                        "--controllers: unknown controller {entry:?} (known: all, {}; \
                         kube-controller-manager's *, endpoint, endpointslicemirroring, \
                         service, endpoints-controller, endpointslice-controller, \
                         endpointslice-mirroring-controller, service-lb-controller and -name)",
                        Controllers::NAMES.join(", ")
                    ));
                }
            }
        }
        if !any {
            return Ok(Controllers::ALL);
        }
        Ok(Controllers {
            endpointslice: selected.endpointslice && !disabled.endpointslice,
            endpoints: selected.endpoints && !disabled.endpoints,
            mirroring: selected.mirroring && !disabled.mirroring,
            load_balancer: selected.load_balancer && !disabled.load_balancer,
        })
    }
}

impl Controllers {
    /// Whether `list` names the service controller itself (not only through `all` or `*`).
    pub fn names_load_balancer(list: &str) -> bool {
        list.split(',')
            .map(str::trim)
            .any(|n| matches!(n, "service-lb" | "service" | "service-lb-controller"))
    }
}

impl Default for Controllers {
    fn default() -> Self {
        Controllers::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_and_kube_controller_managers_spellings() {
        assert_eq!(Controllers::parse(""), Ok(Controllers::ALL));
        assert_eq!(Controllers::parse("all"), Ok(Controllers::ALL));
        assert_eq!(Controllers::parse("*"), Ok(Controllers::ALL));
        assert_eq!(
            Controllers::parse("endpointslice"),
            Ok(Controllers::ENDPOINTSLICE)
        );
        let no_mirroring = Controllers {
            mirroring: false,
            ..Controllers::ALL
        };
        let endpoints_only = Controllers {
            load_balancer: false,
            ..no_mirroring
        };
        assert_eq!(
            Controllers::parse("*,-endpointslice-mirroring"),
            Ok(no_mirroring)
        );
        assert_eq!(Controllers::parse("-mirroring,all"), Ok(no_mirroring));
        assert_eq!(
            Controllers::parse("endpoint,endpointslice"),
            Ok(endpoints_only)
        );
        assert_eq!(
            Controllers::parse("*,-service-lb-controller"),
            Ok(Controllers::ENDPOINT_CONTROLLERS)
        );
        assert_eq!(
            Controllers::parse("service-lb"),
            Ok(Controllers::LOAD_BALANCER)
        );
        // As kube-controller-manager: a switch-off alone enables nothing.
        let none = Controllers {
            endpointslice: false,
            endpoints: false,
            mirroring: false,
            load_balancer: false,
        };
        assert_eq!(Controllers::parse("-endpoint"), Ok(none));
        assert!(Controllers::parse("-all").is_err());
        assert!(Controllers::names_load_balancer(
            "endpoint, service-lb-controller"
        ));
        assert!(!Controllers::names_load_balancer("*,-service"));
        assert!(!Controllers::names_load_balancer("all"));
        assert!(Controllers::parse("endpointslices").is_err());
    }
}
