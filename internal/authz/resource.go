package authz

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// maxBundleDepth bounds Bundles within Bundles (a batch response holding a
// search set) the response check walks.
const maxBundleDepth = 4

// patientRef classifies a reference: whether it names Patient/pid, and
// whether it names some other Patient. Relative ("Patient/1"), absolute
// (".../Patient/1") and versioned ("Patient/1/_history/2") forms count.
func patientRef(ref, pid string) (ours, other bool) {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	var id string
	switch {
	case strings.HasPrefix(ref, "Patient/"):
		id = ref[len("Patient/"):]
	case strings.Contains(ref, "/Patient/"):
		id = ref[strings.LastIndex(ref, "/Patient/")+len("/Patient/"):]
	default:
		return false, false
	}
	if id == pid {
		return true, false
	}
	return false, true
}

// references collects the Reference.reference strings found at a dotted
// element path, walking arrays at every step.
func references(v any, elemPath string, out []string) []string {
	head, rest, more := strings.Cut(elemPath, ".")
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = references(e, elemPath, out)
		}
		return out
	case map[string]any:
		child, ok := x[head]
		if !ok {
			return out
		}
		if more {
			return references(child, rest, out)
		}
		return referenceStrings(child, out)
	}
	return out
}

func referenceStrings(v any, out []string) []string {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = referenceStrings(e, out)
		}
	case map[string]any:
		if r, ok := x["reference"].(string); ok {
			out = append(out, r)
		}
	}
	return out
}

// compartmentRefs returns the references of a resource of a member type
// that decide its compartment.
func compartmentRefs(typ string, res map[string]any) []string {
	var refs []string
	for _, e := range patientCompartment[typ].elements {
		refs = references(res, e, refs)
	}
	return refs
}

// memberOf tells whether a decoded resource of typ is in pid's compartment.
func memberOf(typ string, res map[string]any, pid string) bool {
	switch compartmentOf(typ) {
	case kindOutside:
		return true
	case kindPatient:
		id, _ := res["id"].(string)
		return id == pid
	case kindMember:
		for _, r := range compartmentRefs(typ, res) {
			if ours, _ := patientRef(r, pid); ours {
				return true
			}
		}
	}
	return false
}

// inCompartment decodes body, a resource of typ, and tells whether it is
// in pid's compartment.
func inCompartment(typ string, body []byte, pid string) bool {
	var res map[string]any
	if json.Unmarshal(body, &res) != nil {
		return false
	}
	if rt, _ := res["resourceType"].(string); rt != typ {
		return false
	}
	return memberOf(typ, res, pid)
}

// resourceIs tells whether body is the resource typ/id.
func resourceIs(body []byte, typ, id string) bool {
	var res struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	return json.Unmarshal(body, &res) == nil && res.ResourceType == typ && res.ID == id
}

// writeBelongs checks a resource a patient-context create or update sends:
// of typ, referencing the patient in a compartment element, and no other
// patient there.
func writeBelongs(typ string, body []byte, pid string) error {
	var res map[string]any
	if len(body) == 0 || json.Unmarshal(body, &res) != nil {
		return errors.New("a write in a patient context must carry a JSON resource the gate can read")
	}
	if rt, _ := res["resourceType"].(string); rt != typ {
		return fmt.Errorf("the body is not a %s", typ)
	}
	ours := false
	for _, r := range compartmentRefs(typ, res) {
		o, other := patientRef(r, pid)
		if other {
			return fmt.Errorf("the %s references another patient (%s)", typ, r)
		}
		ours = ours || o
	}
	if !ours {
		return fmt.Errorf("a %s written in a patient context must reference Patient/%s (%s)", typ, pid,
			strings.Join(patientCompartment[typ].elements, ", "))
	}
	return nil
}

// patchKeepsPatient checks a patient-context patch: a JSON Patch that
// touches none of the elements deciding the compartment (the stored
// resource is checked separately). Other patch formats are refused: the
// gate would have to evaluate FHIRPath to know what they change.
func patchKeepsPatient(typ string, body []byte) error {
	var ops []struct {
		Path string `json:"path"`
		From string `json:"from"`
	}
	if json.Unmarshal(body, &ops) != nil {
		return errors.New("a patch in a patient context must be a JSON Patch")
	}
	for _, op := range ops {
		for i, p := range []string{op.Path, op.From} {
			if i == 1 && p == "" {
				continue
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
			for _, e := range patientCompartment[typ].elements {
				top, _, _ := strings.Cut(e, ".")
				if first == top || first == "" {
					return fmt.Errorf("a patch in a patient context may not change %s", top)
				}
			}
		}
	}
	return nil
}

// checkResource checks one decoded answer; see Access.CheckResponse. It
// returns an error naming the first resource outside the compartment.
func checkResource(body []byte, pid string) error {
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		return errors.New("an answer that is not JSON")
	}
	return checkDecoded(v, pid, 0)
}

func checkDecoded(res map[string]any, pid string, depth int) error {
	typ, _ := res["resourceType"].(string)
	switch typ {
	case "":
		return errors.New("an answer that is not a resource")
	case "OperationOutcome":
		return nil
	case "Bundle":
		if depth >= maxBundleDepth {
			return errors.New("Bundles nested too deep")
		}
		entries, _ := res["entry"].([]any)
		for _, e := range entries {
			entry, _ := e.(map[string]any)
			inner, ok := entry["resource"].(map[string]any)
			if !ok {
				continue
			}
			if err := checkDecoded(inner, pid, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if !memberOf(typ, res, pid) {
		id, _ := res["id"].(string)
		return fmt.Errorf("%s/%s", typ, id)
	}
	return nil
}
