# core/resume: the hub (publisher) and the client (subscriber) of the resume
# protocol, and the sink-recording requests. Test names start with "Resume".
include(resume_hub.cmake OPTIONAL)
include(resume_client.cmake OPTIONAL)
