//! Which of the controllers sliced replaces run: kube-controller-manager's `--controllers`.

/// The controllers a pass runs: kube-controller-manager's `--controllers`, for the three sliced
/// replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controllers {
    pub endpointslice: bool,
    pub endpoints: bool,
    pub mirroring: bool,
}

impl Controllers {
    pub const ALL: Controllers = Controllers {
        endpointslice: true,
        endpoints: true,
        mirroring: true,
    };
    pub const ENDPOINTSLICE: Controllers = Controllers {
        endpointslice: true,
        endpoints: false,
        mirroring: false,
    };
    /// The names `parse` knows.
    pub const NAMES: [&'static str; 3] = ["endpointslice", "endpoints", "mirroring"];

    /// A comma-separated list of controller names; `all` (or nothing) selects every one.
    pub fn parse(list: &str) -> Result<Controllers, String> {
        let mut selected = Controllers {
            endpointslice: false,
            endpoints: false,
            mirroring: false,
        };
        let mut any = false;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            any = true;
            match name {
                "all" => selected = Controllers::ALL,
                "endpointslice" => selected.endpointslice = true,
                "endpoints" => selected.endpoints = true,
                "mirroring" => selected.mirroring = true,
                other => {
                    return Err(format!(
                        "--controllers: unknown controller {other:?} (known: all, {})",
                        Controllers::NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(if any { selected } else { Controllers::ALL })
    }
}

impl Default for Controllers {
    fn default() -> Self {
        Controllers::ALL
    }
}
