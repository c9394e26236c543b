print("apns-bridge")
