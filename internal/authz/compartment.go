package authz

import "github.com/fhirgate/fhirgate/internal/fhir"

// compartmentMember is how one resource type belongs to the Patient
// compartment (FHIR R4 CompartmentDefinition/patient): the search
// parameters that name the patient, and the element paths those
// parameters search (dotted, arrays walked at each step).
type compartmentMember struct {
	params   []string
	elements []string
}

// patientCompartment embeds the R4 Patient compartment for the types a
// patient-facing app commonly uses. A type of the compartment that is not
// in this table (r4CompartmentOnly) is refused under a patient/ scope:
// the gate cannot confine what it cannot read.
var patientCompartment = map[string]compartmentMember{
	"Account":                  {[]string{"subject"}, []string{"subject"}},
	"AdverseEvent":             {[]string{"subject"}, []string{"subject"}},
	"AllergyIntolerance":       {[]string{"patient", "recorder", "asserter"}, []string{"patient", "recorder", "asserter"}},
	"Appointment":              {[]string{"actor"}, []string{"participant.actor"}},
	"AppointmentResponse":      {[]string{"actor"}, []string{"actor"}},
	"Basic":                    {[]string{"patient", "author"}, []string{"subject", "author"}},
	"BodyStructure":            {[]string{"patient"}, []string{"patient"}},
	"CarePlan":                 {[]string{"patient", "performer"}, []string{"subject", "activity.detail.performer"}},
	"CareTeam":                 {[]string{"patient", "participant"}, []string{"subject", "participant.member"}},
	"Claim":                    {[]string{"patient", "payee"}, []string{"patient", "payee.party"}},
	"ClinicalImpression":       {[]string{"subject"}, []string{"subject"}},
	"Communication":            {[]string{"subject", "sender", "recipient"}, []string{"subject", "sender", "recipient"}},
	"CommunicationRequest":     {[]string{"subject", "sender", "recipient", "requester"}, []string{"subject", "sender", "recipient", "requester"}},
	"Composition":              {[]string{"subject", "author", "attester"}, []string{"subject", "author", "attester.party"}},
	"Condition":                {[]string{"patient", "asserter"}, []string{"subject", "asserter"}},
	"Consent":                  {[]string{"patient"}, []string{"patient"}},
	"Coverage":                 {[]string{"policy-holder", "subscriber", "beneficiary", "payor"}, []string{"policyHolder", "subscriber", "beneficiary", "payor"}},
	"DetectedIssue":            {[]string{"patient"}, []string{"patient"}},
	"DeviceRequest":            {[]string{"subject", "performer"}, []string{"subject", "performer"}},
	"DeviceUseStatement":       {[]string{"subject"}, []string{"subject"}},
	"DiagnosticReport":         {[]string{"subject"}, []string{"subject"}},
	"DocumentReference":        {[]string{"subject", "author"}, []string{"subject", "author"}},
	"Encounter":                {[]string{"patient"}, []string{"subject"}},
	"EpisodeOfCare":            {[]string{"patient"}, []string{"patient"}},
	"ExplanationOfBenefit":     {[]string{"patient", "payee"}, []string{"patient", "payee.party"}},
	"FamilyMemberHistory":      {[]string{"patient"}, []string{"patient"}},
	"Flag":                     {[]string{"patient"}, []string{"subject"}},
	"Goal":                     {[]string{"patient"}, []string{"subject"}},
	"ImagingStudy":             {[]string{"patient"}, []string{"subject"}},
	"Immunization":             {[]string{"patient"}, []string{"patient"}},
	"List":                     {[]string{"subject", "source"}, []string{"subject", "source"}},
	"Media":                    {[]string{"subject"}, []string{"subject"}},
	"MedicationAdministration": {[]string{"patient", "performer", "subject"}, []string{"subject", "performer.actor"}},
	"MedicationDispense":       {[]string{"subject", "patient", "receiver"}, []string{"subject", "receiver"}},
	"MedicationRequest":        {[]string{"subject"}, []string{"subject"}},
	"MedicationStatement":      {[]string{"subject"}, []string{"subject"}},
	"NutritionOrder":           {[]string{"patient"}, []string{"patient"}},
	"Observation":              {[]string{"subject", "performer"}, []string{"subject", "performer"}},
	"Procedure":                {[]string{"patient", "performer"}, []string{"subject", "performer.actor"}},
	"QuestionnaireResponse":    {[]string{"subject", "author"}, []string{"subject", "author"}},
	"RiskAssessment":           {[]string{"subject"}, []string{"subject"}},
	"ServiceRequest":           {[]string{"subject", "performer"}, []string{"subject", "performer"}},
	"Specimen":                 {[]string{"subject"}, []string{"subject"}},
}

// r4CompartmentOnly are the other members of the R4 Patient compartment:
// under a patient/ scope they are refused outright.
var r4CompartmentOnly = map[string]struct{}{
	"AuditEvent": {}, "ChargeItem": {}, "ClaimResponse": {}, "CoverageEligibilityRequest": {},
	"CoverageEligibilityResponse": {}, "DocumentManifest": {}, "EnrollmentRequest": {}, "Group": {},
	"ImmunizationEvaluation": {}, "ImmunizationRecommendation": {}, "Invoice": {}, "MeasureReport": {},
	"MolecularSequence": {}, "Person": {}, "Provenance": {}, "RelatedPerson": {}, "RequestGroup": {},
	"ResearchSubject": {}, "Schedule": {}, "SupplyDelivery": {}, "SupplyRequest": {}, "VisionPrescription": {},
}

// patientDataOutside are types outside the R4 Patient compartment that
// still carry one patient's data (Task.for, a Binary attachment, a stored
// Bundle): under a patient/ scope they are refused like unchecked members.
var patientDataOutside = map[string]struct{}{
	"Binary": {}, "Bundle": {}, "Task": {}, "Linkage": {}, "Subscription": {},
}

// compartmentKind says how a type relates to the Patient compartment.
type compartmentKind uint8

const (
	kindOutside   compartmentKind = iota // an R4 type that is not patient data: Practitioner, Organization, Medication; and Bot
	kindPatient                          // Patient itself
	kindMember                           // in patientCompartment
	kindUnchecked                        // a compartment type the gate cannot confine
)

func compartmentOf(typ string) compartmentKind {
	if typ == "Patient" {
		return kindPatient
	}
	if _, ok := patientCompartment[typ]; ok {
		return kindMember
	}
	if _, ok := r4CompartmentOnly[typ]; ok {
		return kindUnchecked
	}
	if _, ok := patientDataOutside[typ]; ok {
		return kindUnchecked
	}
	// A type the gate does not know could hold anything.
	if typ != "Bot" && !fhir.IsResourceType(typ) {
		return kindUnchecked
	}
	return kindOutside
}
